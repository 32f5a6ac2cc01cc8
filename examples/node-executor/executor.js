#!/usr/bin/env node
// A minimal agent executor that uses stockade as its confine provider, exactly as
// docs/provider-contract.md describes: confine -> spawn -> collect stderr -> classify.
// Plain Node.js, no npm packages.
//
// usage: node executor.js [--stockade PATH] [--mode MODE] [--workspace DIR]
//                         [--after-confine SCRIPT] [--argv] -- COMMAND...
//
//   COMMAND        one shell command, run as ["bash", "-c", COMMAND] (what harnesses do);
//                  with --argv, the words after -- are the argv itself.
//   --stockade     the stockade binary (default: $STOCKADE, else "stockade" on PATH).
//   --after-confine SCRIPT
//                  runs `sh -c SCRIPT` between confine and spawn (a demonstration hook:
//                  the tests use it to delete the workspace in that window).
//
// Prints one JSON object: { verdict, exitCode, signal, stdout, stderr }.
// Exits 0 when it obtained a verdict; otherwise prints { error, sandboxUnavailable }
// and exits 125. Bad usage of this script prints one `executor: ` line and exits 2.

'use strict';

const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const CONTRACT = 2;

function parseArgs(argv) {
  const opts = {
    stockade: process.env.STOCKADE || 'stockade',
    mode: 'workspace-write',
    workspace: null,
    afterConfine: null,
    rawArgv: false,
    command: null,
  };
  let i = 0;
  for (; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') { i++; break; }
    if (a === '--argv') { opts.rawArgv = true; continue; }
    const value = argv[i + 1];
    if (value === undefined) throw new Error(`${a} needs a value`);
    if (a === '--stockade') opts.stockade = value;
    else if (a === '--mode') opts.mode = value;
    else if (a === '--workspace') opts.workspace = value;
    else if (a === '--after-confine') opts.afterConfine = value;
    else throw new Error(`unknown option ${a}`);
    i++;
  }
  const rest = argv.slice(i);
  if (rest.length === 0) throw new Error('missing COMMAND after --');
  if (opts.rawArgv) opts.command = rest;
  else if (rest.length === 1) opts.command = ['bash', '-c', rest[0]];
  else throw new Error('give one shell COMMAND (or --argv ARGV...)');
  return opts;
}

// Step 1: ask stockade for the confined argv.
function confine(opts) {
  const args = ['confine', '--mode', opts.mode];
  if (opts.workspace) args.push('--workspace', opts.workspace);
  args.push('--', ...opts.command);
  const r = spawnSync(opts.stockade, args, {
    cwd: opts.workspace || process.cwd(),
    encoding: 'utf8',
  });
  if (r.error) throw r.error;
  if (r.status !== 0) {
    const err = new Error(`stockade confine failed (exit ${r.status}): ${r.stderr.trim()}`);
    // A provider that cannot confine refuses; never fall back to running unconfined.
    err.sandboxUnavailable = r.stderr.includes('SANDBOX_UNAVAILABLE');
    throw err;
  }
  const confined = JSON.parse(r.stdout);
  if (confined.contract !== CONTRACT) {
    throw new Error(`stockade speaks contract ${confined.contract}, this executor ${CONTRACT}`);
  }
  return confined;
}

// Step 2: spawn the argv under our own supervision and collect its output.
function runToCompletion(argv) {
  return new Promise((resolve) => {
    const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    const out = [];
    const err = [];
    child.stdout.on('data', (d) => out.push(d));
    child.stderr.on('data', (d) => err.push(d));
    child.on('error', (e) => {
      // The runner itself could not be started: nothing ran.
      resolve({ exitCode: 125, signal: null, stdout: '', stderr: `spawn failed: ${e.message}\n` });
    });
    child.on('close', (exitCode, signal) => {
      resolve({
        exitCode,
        signal,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
      });
    });
  });
}

// Step 3: ask stockade what happened. It reads the runner's status record, so a
// command cannot pass itself off as a sandbox failure.
//
// Neither input may lie where a confined command can write (the workspace, /tmp,
// $TMPDIR): a command, or a process it left running, could rewrite it before classify
// reads it. So the ConfinedArgv goes on stdin (it never was a file), and the stderr
// capture goes into a fresh 0700 directory under $XDG_RUNTIME_DIR (else
// ~/.local/state), which no policy may grant: stockade keeps its own control files there
// and refuses a policy whose writable roots contain them.
function privateBase() {
  const runtime = process.env.XDG_RUNTIME_DIR;
  if (runtime && path.isAbsolute(runtime)) return runtime;
  const state = path.join(os.homedir(), '.local', 'state');
  fs.mkdirSync(state, { recursive: true, mode: 0o700 });
  return state;
}

function classify(opts, confined, settled) {
  const dir = fs.mkdtempSync(path.join(privateBase(), 'node-executor-'));
  try {
    const stderrFile = path.join(dir, 'stderr');
    fs.writeFileSync(stderrFile, settled.stderr, { mode: 0o600, flag: 'wx' });
    const args = ['classify', '--confined', '-', '--stderr', stderrFile];
    if (settled.exitCode === null) args.push('--signal', settled.signal);
    else args.push('--exit-code', String(settled.exitCode));
    const r = spawnSync(opts.stockade, args, { input: JSON.stringify(confined), encoding: 'utf8' });
    if (r.error) throw r.error;
    if (r.status !== 0) throw new Error(`stockade classify failed: ${r.stderr.trim()}`);
    return JSON.parse(r.stdout);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`executor: ${e.message}\n`);
    return 2;
  }
  try {
    const confined = confine(opts);
    if (opts.afterConfine) spawnSync('sh', ['-c', opts.afterConfine], { stdio: 'inherit' });
    const settled = await runToCompletion(confined.argv);
    const verdict = classify(opts, confined, settled);
    process.stdout.write(JSON.stringify({ verdict, ...settled }) + '\n');
    return 0;
  } catch (e) {
    process.stdout.write(JSON.stringify({
      error: e.message,
      sandboxUnavailable: Boolean(e.sandboxUnavailable),
    }) + '\n');
    return 125;
  }
}

main().then((code) => { process.exitCode = code; });
