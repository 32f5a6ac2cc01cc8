// Drives the harness's own bash executor (@deepseek-ai/dsh-bash-sandbox), unmodified,
// through the stockade provider, against the real kernel. Every denial or failure case
// has its control. Run by test.sh with node >= 22.19; STOCKADE names the launcher,
// NO_LANDLOCK the test helper that starts a program with Landlock unavailable.
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync, chmodSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { Context } from '@deepseek-ai/cordis'
import LocalSubprocessRuntime from '@deepseek-ai/dsh-subprocess-local'
import SandboxPolicyService from '@deepseek-ai/dsh-sandbox-policy'
import SandboxBashExecutor from '@deepseek-ai/dsh-bash-sandbox'
import { SANDBOX_UNAVAILABLE, sandboxDenialMarker } from '@deepseek-ai/dsh-sandbox'
import StockadeSandboxProvider from '../dist/index.js'

const STOCKADE = process.env.STOCKADE
const SCRATCH = process.env.SCRATCH_BASE
const NETCLIENT = process.env.NETCLIENT
assert.ok(STOCKADE && SCRATCH && NETCLIENT, 'STOCKADE, SCRATCH_BASE and NETCLIENT must be set')

// Outside /tmp (which workspace-write grants), so "outside" is outside every root.
const root = mkdtempSync(join(SCRATCH, 'dsh-e2e-'))
const ws = join(root, 'ws')
const outside = join(root, 'outside')
const runtime = join(root, 'runtime')
for (const d of [ws, outside, runtime]) mkdirSync(d, { mode: 0o700 })
process.env.XDG_RUNTIME_DIR = runtime
const privateDirs = (under = runtime) => {
  const base = join(under, 'stockade')
  return existsSync(base) ? readdirSync(base).filter((n) => n.startsWith('req-')) : []
}
// The directory a kept `stockade serve` made ahead for its next request (its request
// file made, empty); it goes when the server ends.
const isSpare = (name, under = runtime) => {
  try {
    return statSync(join(under, 'stockade', name, 'request')).size === 0
  } catch {
    return false
  }
}
const usedDirs = (under = runtime) => privateDirs(under).filter((n) => !isSpare(n, under))
// Spares of servers a test killed, which nothing removes until the sweep.
const orphans = []
// Once a provider is disposed its servers end and remove their spares: nothing is left.
const noDirsLeft = async (under = runtime, kept = []) => {
  const left = () => privateDirs(under).filter((n) => !orphans.includes(n) && !kept.includes(n))
  for (let i = 0; i < 300 && left().length > 0; i++) await pause(10)
  const what = left().map((n) => `${n}: ${readdirSync(join(under, 'stockade', n)).map((f) => `${f} (${statSync(join(under, 'stockade', n, f)).size})`).join(' ')}`)
  assert.deepEqual(what, [])
}
// The launch request a ConfinedArgv names: the argument after `--request`, wherever the
// runner's arguments start (after the namespace stage's, when there is one).
const requestOf = (confined) => {
  const i = confined.argv.indexOf('--request')
  assert.ok(i > 0 && i + 1 < confined.argv.length, `no --request in ${JSON.stringify(confined.argv)}`)
  return confined.argv[i + 1]
}
// Host pids (this process's /proc) whose argv[0] is exactly `name`: a pid the command
// sees inside its own pid namespace is not a host pid.
const hostPidsNamed = (name) => readdirSync('/proc').filter((n) => /^\d+$/.test(n)).filter((pid) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] === name
  } catch {
    return false
  }
})
const pause = (ms) => new Promise((r) => setTimeout(r, ms))

async function harness(providerConfig = {}) {
  const ctx = new Context()
  await ctx.plugin(LocalSubprocessRuntime)
  await ctx.plugin(SandboxPolicyService, { mode: 'workspace-write', workspaceRoot: ws })
  await ctx.plugin(StockadeSandboxProvider, { stockade: STOCKADE, ...providerConfig })
  await ctx.plugin(SandboxBashExecutor, { cwd: ws })
  const shell = ctx.get('shell')
  const provider = ctx.get('sandbox')
  assert.ok(shell && provider, 'the executor and the provider are registered')
  // Every ConfinedArgv the executor was handed, to compare with stockade classify.
  const handed = []
  const confine = provider.confine.bind(provider)
  provider.confine = (argv, policy) => {
    const c = confine(argv, policy)
    handed.push(c)
    return c
  }
  const run = (command, extra = {}) => shell.run(shell.resolve({ command, ...extra }))
  return { ctx, shell, provider, run, handed }
}

const results = []
async function test(name, fn) {
  try {
    await fn()
    results.push(`ok   ${name}`)
  } catch (error) {
    results.push(`FAIL ${name}: ${error?.stack ?? error}`)
  }
}

const h = await harness()

await test('probe goes through stockade probe --json', async () => {
  const probe = await h.provider.probe()
  assert.equal(typeof probe.kernel.landlockAbi, 'number')
  assert.ok(['full', 'partial'].includes(probe.modes['workspace-write'].verdict))
})

await test("the executor's cwd and per-call env reach the command; secrets do not", async () => {
  const sub = join(ws, 'sub')
  mkdirSync(sub, { recursive: true })
  process.env.STOCKADE_E2E_TOKEN = 'leak'
  const r = await h.run('pwd; echo "$PER_CALL $TERM $PAGER ${STOCKADE_E2E_TOKEN:-none}"', {
    workdir: sub, env: { PER_CALL: 'per-call' },
  })
  delete process.env.STOCKADE_E2E_TOKEN
  assert.equal(r.exitCode, 0, r.stderr.text)
  assert.equal(r.stdout.text, `${sub}\nper-call dumb cat none\n`)
  assert.deepEqual(r.sandbox, { mode: 'workspace-write', denied: false, enforcement: h.handed.at(-1).enforcement })
})

await test("stockade's environment rule applies to what the runner inherits, unless unfiltered", async () => {
  // The harness's own scrub removes KEY|PASSWORD|SECRET|TOKEN names; stockade's rule also
  // removes PASSPHRASE ones, so this one reaches the runner and is filtered there.
  process.env.STOCKADE_E2E_PASSPHRASE = 'leak'
  try {
    const r = await h.run('echo "${STOCKADE_E2E_PASSPHRASE:-none}"')
    assert.equal(r.stdout.text, 'none\n')
    // Control: unfiltered, the same variable arrives.
    const u = await harness({ inheritEnv: 'unfiltered' })
    const ru = await u.run('echo "${STOCKADE_E2E_PASSPHRASE:-none}"')
    assert.equal(ru.stdout.text, 'leak\n')
    await u.ctx.fiber.dispose()
  } finally {
    delete process.env.STOCKADE_E2E_PASSPHRASE
  }
})

await test('a write outside is a denial with the harness marker; inside is not', async () => {
  const target = join(outside, 'escape')
  const r = await h.run(`echo x > ${target}`)
  assert.equal(r.exitCode, 1)
  assert.equal(r.sandbox.denied, true)
  assert.equal(sandboxDenialMarker(r.sandbox.mode), '[sandbox: file access denied under workspace-write mode]')
  assert.ok(!existsSync(target))
  const ok = await h.run('echo x > inside && cat inside')
  assert.equal(ok.exitCode, 0)
  assert.equal(ok.sandbox.denied, false)
})

await test('a failed kill or chown is an ordinary failure, not a denial', async () => {
  writeFileSync(join(ws, 'owned'), '')
  for (const cmd of ['kill -TERM 1', 'chown 12345 owned']) {
    const r = await h.run(cmd)
    assert.notEqual(r.exitCode, 0, cmd)
    assert.match(r.stderr.text, /Operation not permitted/, cmd)
    assert.equal(r.sandbox.denied, false, cmd)
  }
})

await test('a forged runner-failure line is an ordinary failure; a real one is SANDBOX_UNAVAILABLE', async () => {
  const r = await h.run("echo 'stockade-runner: sandbox unavailable: forged' >&2; exit 125")
  assert.equal(r.exitCode, 125)
  assert.equal(r.sandbox.denied, false)
  // Control: the runner really fails (its request is gone before the spawn).
  const confine = h.provider.confine
  h.provider.confine = (argv, policy) => {
    const c = confine(argv, policy)
    rmSync(requestOf(c))
    return c
  }
  try {
    await assert.rejects(h.run('echo never'), (e) => e.code === SANDBOX_UNAVAILABLE && /stockade-runner: \[/.test(e.message))
  } finally {
    h.provider.confine = confine
  }
})

await test('a kernel that cannot confine is SANDBOX_UNAVAILABLE at confine time', async () => {
  const wrapper = join(root, 'stockade-no-landlock')
  writeFileSync(wrapper, `#!/bin/sh\nexec ${process.env.NO_LANDLOCK} ${STOCKADE} "$@"\n`)
  chmodSync(wrapper, 0o700)
  const broken = await harness({ stockade: wrapper })
  await assert.rejects(broken.run('echo never > ran'), (e) => e.code === SANDBOX_UNAVAILABLE)
  assert.ok(!existsSync(join(ws, 'ran')))
  await broken.ctx.fiber.dispose()
})

await test('a timeout ends the whole process group', async () => {
  // The background process carries a unique argv[0], found in the host's /proc.
  const tag = `stockade-e2e-bg-${process.pid}-${Date.now()}`
  const running = h.run(`(exec -a ${tag} sleep 60) & sleep 60`, { timeoutMs: 3000 })
  // Control: while the command runs, the host sees its background process.
  let seen = []
  for (let i = 0; i < 250 && seen.length === 0; i++) {
    seen = hostPidsNamed(tag)
    if (seen.length === 0) await pause(10)
  }
  assert.ok(seen.length > 0, `the background process ${tag} never appeared on the host`)
  const r = await running
  assert.equal(r.timedOut, true)
  for (let i = 0; i < 100 && hostPidsNamed(tag).length > 0; i++) await pause(50)
  assert.deepEqual(hostPidsNamed(tag), [], `background process ${tag} (host pids ${seen}) survived the timeout`)
})

await test('a confine past its deadline is SANDBOX_UNAVAILABLE, synchronous or not', async () => {
  const slow = join(root, 'stockade-slow')
  // A server that never answers, and has started a process that holds its stdout: the
  // answer's FIFO ends only once that one is gone too (the deadline kills the server's
  // whole process group; killed alone, the call would wait for the other for good).
  // `confine` itself answers: the first call, which finds no server, is answered by a
  // process of its own (the control), and starts the server the next call waits for.
  writeFileSync(slow, `#!/bin/bash\nif [ "$1" = serve ]; then (exec -a stockade-slow-sleep sleep 100000) & exec sleep 100000; fi\nexec '${STOCKADE}' "$@"\n`)
  chmodSync(slow, 0o700)
  const s = await harness({ stockade: slow, confineTimeoutMs: 300 })
  const first = await s.run('echo first')
  assert.equal(first.stdout.text, 'first\n', first.stderr.text)
  await assert.rejects(s.run('echo never > ran-slow'), (e) => e.code === SANDBOX_UNAVAILABLE && /no answer within 300 ms/.test(e.message))
  const policy = { mode: 'workspace-write', workspaceRoot: ws }
  await assert.rejects(s.provider.confineAsync(['true'], policy, { deadlineMs: 300 }), (e) => e.code === SANDBOX_UNAVAILABLE)
  // Each server's whole process group was killed, what it started included.
  for (let i = 0; i < 100 && hostPidsNamed('stockade-slow-sleep').length > 0; i++) await pause(10)
  assert.deepEqual(hostPidsNamed('stockade-slow-sleep'), [])
  assert.ok(!existsSync(join(ws, 'ran-slow')))
  await s.ctx.fiber.dispose()
  // A `confine` process past the deadline, as the first call starts one, is killed too.
  const stuck = join(root, 'stockade-stuck')
  writeFileSync(stuck, `#!/bin/bash\nexec -a stockade-stuck-confine sleep 100000\n`)
  chmodSync(stuck, 0o700)
  const t = await harness({ stockade: stuck, confineTimeoutMs: 300 })
  await assert.rejects(t.run('echo never > ran-stuck'), (e) => e.code === SANDBOX_UNAVAILABLE && /no answer within 300 ms/.test(e.message))
  assert.deepEqual(hostPidsNamed('stockade-stuck-confine'), [])
  assert.ok(!existsSync(join(ws, 'ran-stuck')))
  await t.ctx.fiber.dispose()
})

await test('an aborted confineAsync rejects; a completed one is removed on dispose', async () => {
  const policy = { mode: 'workspace-write', workspaceRoot: ws }
  const ac = new AbortController()
  ac.abort(new Error('stop'))
  await assert.rejects(h.provider.confineAsync(['true'], policy, { signal: ac.signal }), /stop/)
  const c = await h.provider.confineAsync(['true'], policy, { deadlineMs: 5000 })
  // The request lies in the private directory, which the status path names.
  const request = requestOf(c)
  assert.equal(dirname(request), dirname(c.statusPath))
  assert.ok(existsSync(request))
  h.provider.dispose()
  assert.ok(!existsSync(dirname(c.statusPath)))
})

// Every verdict below comes from a provider with its defaults (settlePollMs 50 ms), on
// commands that run for 0.5 s: the sweep sees each runner's record ten times before
// settle() asks, and the verdict must not depend on that.
const LONG = 'sleep 0.5; '
const settleRun = (p, r) => p.provider.settle(p.handed.at(-1), { exitCode: r.exitCode, signal: r.signal, stderr: r.stderr.text })

await test('settle() gives the true verdict for commands that outlive many polls, and agrees with the executor', async () => {
  const cases = [
    { command: `${LONG}echo fine`, outcome: 'ok' },
    { command: `${LONG}echo x > ${join(outside, 'nope')}`, outcome: 'denied', detail: /nope/ },
    { command: `${LONG}exit 3`, outcome: 'failed' },
    { command: `${LONG}echo 'stockade-runner: sandbox unavailable: forged' >&2; exit 125`, outcome: 'failed' },
    { command: `${LONG}kill -TERM 1`, outcome: 'failed' },
  ]
  // settle keeps the stderr it hands classify out of the temp directory (which
  // workspace-write grants): with TMPDIR missing it works all the same.
  const savedTmp = process.env.TMPDIR
  process.env.TMPDIR = join(root, 'no-such-tmp')
  try {
    for (const { command, outcome, detail } of cases) {
      const r = await h.run(command)
      const confined = h.handed.at(-1)
      // Control: the directory is still there, several polls after the runner's record.
      await pause(300)
      assert.ok(existsSync(confined.statusPath), `${command}: the status record is gone before settle()`)
      assert.ok(!existsSync(requestOf(confined)), `${command}: the request outlived its run`)
      const v = await settleRun(h, r)
      assert.equal(v.outcome, outcome, `${command}: ${JSON.stringify(v)}`)
      assert.equal(v.evidence, 'status-channel', command)
      assert.equal(v.denied, r.sandbox.denied, command)
      assert.equal(v.runnerFailed, false, command)
      assert.equal(v.enforcement, r.sandbox.enforcement, command)
      if (detail) assert.match(v.detail, detail, command)
      assert.ok(!existsSync(dirname(confined.statusPath)), `${command}: settle() left the directory`)
    }
  } finally {
    if (savedTmp === undefined) delete process.env.TMPDIR
    else process.env.TMPDIR = savedTmp
  }
})

await test("a connection the proxy refused reaches settle() with the verdict", async () => {
  const n = await harness({ extraArgs: ['--allow-domain', 'allowed.test'] })
  const r = await n.run(`${LONG}${NETCLIENT} connect denied.test 80 x`)
  assert.equal(r.exitCode, 0, r.stderr.text)
  assert.equal(r.stdout.text, '403\n')
  await pause(300)
  const v = await settleRun(n, r)
  assert.equal(v.outcome, 'ok', JSON.stringify(v))
  assert.equal(v.network?.denied?.[0]?.host, 'denied.test', JSON.stringify(v))
  await n.ctx.fiber.dispose()
})

await test("the namespace stage's report reaches settle(): a protected name that appeared", async () => {
  mkdirSync(join(ws, '.git', 'hooks'), { recursive: true })
  try {
    const r = await h.run(`${LONG}echo /elsewhere > .git/commondir`)
    assert.equal(r.exitCode, 0, r.stderr.text)
    if (!h.handed.at(-1).argv.includes('__stage')) {
      console.log('SKIPPED (no namespace stage here): the stage report case')
      return
    }
    await pause(300)
    const v = await settleRun(h, r)
    assert.equal(v.outcome, 'ok', JSON.stringify(v))
    assert.deepEqual(v.protectedAppeared, [join(ws, '.git', 'commondir')], JSON.stringify(v))
    // Control: a run that creates none reports none.
    const plain = await h.run(`${LONG}touch plain`)
    const p = await settleRun(h, plain)
    assert.equal(p.outcome, 'ok')
    assert.equal(p.protectedAppeared, undefined, JSON.stringify(p))
  } finally {
    rmSync(join(ws, '.git'), { recursive: true, force: true })
  }
})

await test('a runner that really failed is runner-failed in settle(), after many polls', async () => {
  // The workspace is removed between confine and spawn: the runner refuses to start.
  const gone = join(root, 'gone-ws')
  mkdirSync(gone, { mode: 0o700 })
  const c = h.provider.confine(['bash', '-c', 'echo never'], { mode: 'workspace-write', workspaceRoot: gone })
  rmSync(gone, { recursive: true })
  const p = spawnSync(c.argv[0], c.argv.slice(1), { cwd: ws, encoding: 'utf8' })
  assert.equal(p.status, 125, p.stderr)
  await pause(300)
  const v = await h.provider.settle(c, { exitCode: p.status, signal: p.signal, stderr: p.stderr })
  assert.equal(v.outcome, 'runner-failed', JSON.stringify(v))
  assert.equal(v.runnerFailed, true)
  assert.equal(v.evidence, 'status-channel')
  assert.ok(!existsSync(dirname(c.statusPath)))
})

await test('a command cannot change its own status record; a record changed behind its back is tampered in settle()', async () => {
  // Without the stage Landlock does not govern chmod: the runner's metadata supervisor
  // refuses it outside the writable roots. Its own control directory, so no other
  // command's record is touched.
  const saved = process.env.XDG_RUNTIME_DIR
  const own = join(root, 'runtime-tamper')
  mkdirSync(own, { mode: 0o700 })
  process.env.XDG_RUNTIME_DIR = own
  try {
    const t = await harness({ extraArgs: ['--no-stage'] })
    // Control: the same command without the chmod is ok.
    const honest = await t.run(`${LONG}echo changed`)
    assert.equal((await settleRun(t, honest)).outcome, 'ok')
    // The attack: refused, so nothing to call tampered.
    const r = await t.run(`${LONG}chmod 000 "$XDG_RUNTIME_DIR"/stockade/req-*/status && echo changed`)
    assert.equal(r.stdout.text, '', r.stderr.text)
    assert.match(r.stderr.text, /Operation not permitted/)
    assert.notEqual((await settleRun(t, r)).outcome, 'tampered')
    // The provider's own check: a record changed after the command (as a process
    // outside could) is tampered, never ok.
    const later = await t.run(`${LONG}echo changed`)
    chmodSync(t.handed.at(-1).statusPath, 0)
    const v = await settleRun(t, later)
    assert.equal(v.outcome, 'tampered', JSON.stringify(v))
    assert.match(v.detail, /status record was tampered with/)
    assert.equal(v.enforcement, null)
    await t.ctx.fiber.dispose()
    await noDirsLeft(own)
  } finally {
    process.env.XDG_RUNTIME_DIR = saved
  }
})

await test('100 settled commands leave no private directory', async () => {
  for (let i = 0; i < 100; i++) {
    const r = await h.run(`echo ${i}`)
    assert.equal(r.stdout.text, `${i}\n`)
    await settleRun(h, r)
  }
  assert.deepEqual(usedDirs(), [])
  // What the server made ahead for the next command: one directory at most.
  assert.ok(privateDirs().length <= 1, privateDirs().join(' '))
})

await test('what is kept for settle() is bounded: maxKept, keepForMs, dispose', async () => {
  const shared = privateDirs().filter((n) => isSpare(n))
  const b = await harness({ maxKept: 3 })
  const runs = []
  for (let i = 0; i < 6; i++) runs.push({ r: await b.run(`echo ${i}`), c: b.handed.at(-1) })
  await pause(300)
  assert.deepEqual(runs.map(({ c }) => existsSync(c.statusPath)), [false, false, false, true, true, true])
  // An evicted run has no verdict, and says why rather than calling it tampered.
  await assert.rejects(b.provider.settle(runs[0].c, { exitCode: 0, stderr: '' }), /maxKept \(3\)/)
  assert.equal((await b.provider.settle(runs[5].c, { exitCode: 0, stderr: '' })).outcome, 'ok')
  await b.ctx.fiber.dispose()
  await noDirsLeft(runtime, shared)
  const k = await harness({ keepForMs: 200 })
  const r = await k.run('echo kept')
  const c = k.handed.at(-1)
  for (let i = 0; i < 100 && existsSync(dirname(c.statusPath)); i++) await pause(50)
  assert.ok(!existsSync(dirname(c.statusPath)), 'kept past keepForMs')
  await assert.rejects(k.provider.settle(c, { exitCode: r.exitCode, stderr: r.stderr.text }), /keepForMs/)
  await k.ctx.fiber.dispose()
  await noDirsLeft(runtime, shared)
})

await test('keepEnv passes a variable the executor forwards on purpose; without it the rule withholds it', async () => {
  const policy = { mode: 'workspace-write', workspaceRoot: ws }
  const spawnWith = (c) => spawnSync(c.argv[0], c.argv.slice(1), {
    cwd: ws,
    encoding: 'utf8',
    env: { ...process.env, GH_TOKEN: 'forwarded-on-purpose' },
  })
  // Control: the default rule removes it, and settle() names it (never its value) for
  // the agent, with the setting that passes it.
  const plain = h.provider.confine(['sh', '-c', 'echo "token=${GH_TOKEN-unset}"'], policy)
  const ran = spawnWith(plain)
  assert.match(ran.stdout, /token=unset/)
  const v = await h.provider.settle(plain, { exitCode: ran.status, stderr: ran.stderr })
  assert.equal(v.outcome, 'ok')
  assert.ok(v.envRemoved.includes('GH_TOKEN'), JSON.stringify(v))
  assert.ok(v.notices.some((n) => /withheld .*GH_TOKEN.*keepEnv/.test(n)), JSON.stringify(v.notices))
  assert.ok(!JSON.stringify(v).includes('forwarded-on-purpose'))
  const k = await harness({ keepEnv: ['GH_TOKEN'] })
  const kept = k.provider.confine(['sh', '-c', 'echo "token=${GH_TOKEN-unset}"'], policy)
  const keptRun = spawnWith(kept)
  assert.match(keptRun.stdout, /token=forwarded-on-purpose/)
  const kv = await k.provider.settle(kept, { exitCode: keptRun.status, stderr: keptRun.stderr })
  assert.ok(!(kv.envRemoved ?? []).includes('GH_TOKEN'), JSON.stringify(kv))
  assert.ok(!(kv.notices ?? []).some((n) => n.includes('GH_TOKEN')), JSON.stringify(kv.notices))
  await k.ctx.fiber.dispose()
})

await test('read-only mode needs no workspace; a writing mode names the missing one', async () => {
  const missing = join(root, 'not-yet')
  const c = h.provider.confine(['sh', '-c', 'echo read-only ran'], { mode: 'read-only', workspaceRoot: missing })
  const p = spawnSync(c.argv[0], c.argv.slice(1), { cwd: ws, encoding: 'utf8' })
  assert.equal(p.status, 0, p.stderr)
  assert.match(p.stdout, /read-only ran/)
  await h.provider.settle(c, { exitCode: p.status, stderr: p.stderr })
  assert.throws(
    () => h.provider.confine(['true'], { mode: 'workspace-write', workspaceRoot: missing }),
    (e) => e.code === SANDBOX_UNAVAILABLE && /workspace root .*not-yet does not exist/.test(e.message),
  )
})

await test('the journal: a settled call is finished with its verdict, a spawned one unknown, an unspawned one not-started', async () => {
  const policy = (journalKey) => ({ mode: 'workspace-write', workspaceRoot: ws, journalKey })
  const c = h.provider.confine(['sh', '-c', 'echo journal > journal-ran; exit 3'], policy('dsh-j1'))
  assert.equal(c.journal, 'dsh-j1')
  const p = spawnSync(c.argv[0], c.argv.slice(1), { cwd: ws, encoding: 'utf8' })
  assert.equal(p.status, 3, p.stderr)
  // Spawned, not settled (the executor crashed here): it ran, and nothing says how it ended.
  assert.equal((await h.provider.outcome('dsh-j1')).state, 'unknown')
  const v = await h.provider.settle(c, { exitCode: p.status, stderr: p.stderr })
  const done = await h.provider.outcome('dsh-j1')
  assert.equal(done.state, 'finished', JSON.stringify(done))
  assert.equal(done.result.outcome, v.outcome)
  assert.equal(done.result.receipt.exitCode, 3)
  assert.equal(done.requested.by, 'confine')

  // Never spawned: not-started, and withdrawn, so a late spawn runs nothing.
  const never = h.provider.confine(['sh', '-c', 'touch never-ran'], policy('dsh-j2'))
  assert.equal((await h.provider.outcome('dsh-j2')).state, 'not-started')
  const late = spawnSync(never.argv[0], never.argv.slice(1), { cwd: ws, encoding: 'utf8' })
  assert.equal(late.status, 125, late.stderr)
  assert.ok(!existsSync(join(ws, 'never-ran')), 'a withdrawn request ran')
  await h.provider.settle(never, { exitCode: late.status, stderr: late.stderr })
  assert.ok(!existsSync(dirname(never.statusPath)), 'the withdrawn directory is left behind')

  // No record under a key: undefined. A bad key runs nothing; a used one is refused.
  assert.equal(await h.provider.outcome('dsh-none'), undefined)
  assert.throws(() => h.provider.confine(['touch', 'bad-key-ran'], policy('../x')), /journal key/)
  assert.throws(() => h.provider.confine(['touch', 'reused-ran'], policy('dsh-j1')),
    (e) => e.code === SANDBOX_UNAVAILABLE && /already in the journal/.test(e.message))
  await assert.rejects(h.provider.outcome('a/b'), /journal key/)
  assert.ok(!existsSync(join(ws, 'bad-key-ran')) && !existsSync(join(ws, 'reused-ran')))
  // Control: without a key nothing is recorded and the ConfinedArgv carries none.
  const plain = h.provider.confine(['true'], { mode: 'workspace-write', workspaceRoot: ws })
  assert.equal(plain.journal, undefined)
  const q = spawnSync(plain.argv[0], plain.argv.slice(1), { cwd: ws, encoding: 'utf8' })
  await h.provider.settle(plain, { exitCode: q.status, stderr: q.stderr })
})

await test('the provider declares its Config schema with the defaults', async () => {
  const config = StockadeSandboxProvider.Config({})
  assert.equal(config.confineTimeoutMs, 5000)
  assert.deepEqual(config.keepEnv, [])
  assert.equal(config.inheritEnv, 'filtered')
  assert.equal(config.confineServer, true)
  assert.throws(() => StockadeSandboxProvider.Config({ inheritEnv: 'everything' }))
})

// Host pids of `STOCKADE serve` processes (the provider's kept confine server).
const serverPids = () => readdirSync('/proc').filter((n) => /^\d+$/.test(n)).filter((pid) => {
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
    return argv[0] === STOCKADE && argv[1] === 'serve'
  } catch {
    return false
  }
})
const waitFor = async (what, ok) => {
  for (let i = 0; i < 200 && !ok(); i++) await pause(10)
  assert.ok(ok(), what)
}

await test('confine is answered by one kept stockade serve; one killed or outdated is replaced, never bypassed', async () => {
  const before = new Set(serverPids())
  const sparesBefore = privateDirs().filter((n) => isSpare(n))
  const s = await harness()
  const first = await s.run('echo served > served && cat served')
  assert.equal(first.exitCode, 0, first.stderr.text)
  assert.equal(first.stdout.text, 'served\n')
  const mine = serverPids().filter((p) => !before.has(p))
  assert.equal(mine.length, 1, `one server for the provider, found ${mine}`)
  const again = await s.run('echo twice')
  assert.equal(again.stdout.text, 'twice\n')
  assert.deepEqual(serverPids().filter((p) => !before.has(p)), mine, 'the same server answered again')
  // Killed between commands: the next command is confined by a new server. What it
  // made ahead for its next request is left (to the sweep, past `KEEP_FOR`).
  orphans.push(...privateDirs().filter((n) => isSpare(n) && !sparesBefore.includes(n)))
  process.kill(Number(mine[0]), 'SIGKILL')
  await waitFor('the killed server is gone', () => !serverPids().includes(mine[0]))
  const after = await s.run(`echo x > ${join(outside, 'after-kill')}; echo ran`)
  assert.equal(after.stdout.text, 'ran\n')
  assert.ok(!existsSync(join(outside, 'after-kill')), 'a command ran unconfined after the server died')
  const second = serverPids().filter((p) => !before.has(p))
  assert.equal(second.length, 1)
  assert.notEqual(second[0], mine[0])
  // The provider's environment changed: a server started with the new one answers.
  process.env.STOCKADE_E2E_SERVER_MARK = 'changed'
  try {
    const r = await s.run('echo env')
    assert.equal(r.stdout.text, 'env\n')
    await waitFor('the outdated server is gone', () => !serverPids().includes(second[0]))
    const third = serverPids().filter((p) => !before.has(p))
    assert.equal(third.length, 1)
    assert.notEqual(third[0], second[0])
    // Asynchronous callers share a second one (behind a worker thread), kept as well.
    const policy = { mode: 'workspace-write', workspaceRoot: ws }
    for (const word of ['async', 'again']) {
      const c = await s.provider.confineAsync(['sh', '-c', `echo ${word}`], policy)
      const p = spawnSync(c.argv[0], c.argv.slice(1), { cwd: ws, encoding: 'utf8' })
      assert.equal(p.stdout, `${word}\n`, p.stderr)
      await s.provider.settle(c, { exitCode: p.status, stderr: p.stderr })
      const both = serverPids().filter((q) => !before.has(q))
      assert.equal(both.length, 2, `the synchronous and the asynchronous server, found ${both}`)
      assert.ok(both.includes(third[0]))
    }
  } finally {
    delete process.env.STOCKADE_E2E_SERVER_MARK
  }
  await s.ctx.fiber.dispose()
  await waitFor('dispose() ends the servers', () => serverPids().every((p) => before.has(p)))
  // All but the spare of the provider every test shares.
  await noDirsLeft(runtime, sparesBefore)
  // Control: with confineServer false no server is started, and commands run the same.
  const n = await harness({ confineServer: false })
  const plain = await n.run('echo per-call')
  assert.equal(plain.stdout.text, 'per-call\n')
  assert.deepEqual(serverPids().filter((p) => !before.has(p)), [])
  await n.ctx.fiber.dispose()
})

await test("confine's own channel reaches no command; where FIFOs cannot be made a worker's server answers", async () => {
  const link = (path) => {
    try {
      return readlinkSync(path)
    } catch {
      return ''
    }
  }
  const mine = () => readdirSync('/proc/self/fd').map((fd) => link(`/proc/self/fd/${fd}`))
  const before = new Set(serverPids())
  const s = await harness()
  const first = await s.run('echo up')
  assert.equal(first.stdout.text, 'up\n', first.stderr.text)
  // The server's stdin and stdout: the FIFOs whose other ends this process holds.
  const [server] = serverPids().filter((p) => !before.has(p))
  const fifos = [0, 1].map((fd) => link(`/proc/${server}/fd/${fd}`))
  for (const fifo of fifos) {
    assert.match(fifo, /\/stockade-serve-[^/]+\/(requests|answers) \(deleted\)$/)
    assert.ok(mine().includes(fifo), `${fifo} is not the provider's`)
  }
  const policy = { mode: 'workspace-write', workspaceRoot: ws }
  const list = ['sh', '-c', 'for f in /proc/self/fd/*; do readlink "$f"; done; exit 0']
  const c = s.provider.confine(list, policy)
  const seen = spawnSync(c.argv[0], c.argv.slice(1), { cwd: ws, encoding: 'utf8' })
  assert.equal(seen.status, 0, seen.stderr)
  for (const fifo of fifos) assert.ok(!seen.stdout.includes(fifo), `${fifo} reached the command: ${seen.stdout}`)
  await s.provider.settle(c, { exitCode: seen.status, stderr: seen.stderr })
  // Control: the same listing shows such a descriptor when one is handed over.
  const fd = readdirSync('/proc/self/fd').find((n) => link(`/proc/self/fd/${n}`) === fifos[1])
  const d = s.provider.confine(list, policy)
  // (As its stdin: the runner closes every other descriptor a command is handed.)
  const shown = spawnSync(d.argv[0], d.argv.slice(1), { cwd: ws, encoding: 'utf8', stdio: [Number(fd), 'pipe', 'pipe'] })
  assert.ok(shown.stdout.includes(fifos[1]), shown.stdout + shown.stderr)
  await s.provider.settle(d, { exitCode: shown.status, stderr: shown.stderr })
  // A request larger than a FIFO holds (64 KiB) goes through in parts, as the server
  // reads it.
  const big = Array.from({ length: 6 }, (_, i) => String(i).repeat(100000))
  const b = s.provider.confine(['sh', '-c', 'echo "$# ${#1}"', 'sh', ...big], policy)
  const many = spawnSync(b.argv[0], b.argv.slice(1), { cwd: ws, encoding: 'utf8' })
  assert.equal(many.stdout, '6 100000\n', many.stderr)
  await s.provider.settle(b, { exitCode: many.status, stderr: many.stderr })
  await s.ctx.fiber.dispose()

  // Without mkfifo on PATH: a worker thread's server answers (its stdin a socket of
  // the worker's), and commands run the same.
  const bin = join(root, 'bin-without-mkfifo')
  mkdirSync(bin)
  for (const tool of ['bash', 'sh']) symlinkSync(`/bin/${tool}`, join(bin, tool))
  const saved = process.env.PATH
  process.env.PATH = bin
  try {
    const known = new Set(serverPids())
    const w = await harness()
    // The first call by a process of its own; the second by the server started then.
    for (const word of ['first', 'worker']) {
      const r = await w.run(`echo ${word}`)
      assert.equal(r.stdout.text, `${word}\n`, r.stderr.text)
    }
    const [worker] = serverPids().filter((p) => !known.has(p))
    assert.match(link(`/proc/${worker}/fd/0`), /^socket:/)
    await w.ctx.fiber.dispose()
  } finally {
    process.env.PATH = saved
  }
})

await test("the server's channel and settle's capture lie in the control base, out of every command's reach", async () => {
  // A stockade that notes classify's arguments, then is the real one.
  const log = join(root, 'classify-args')
  const bin = join(root, 'bin-noting-classify')
  mkdirSync(bin)
  const noting = join(bin, 'stockade')
  writeFileSync(noting, `#!/bin/sh\nif [ "$1" = classify ]; then printf '%s\\n' "$@" > '${log}'; fi\nexec '${STOCKADE}' "$@"\n`, { mode: 0o755 })
  const before = new Set(serverPids())
  const s = await harness({ stockade: noting })
  const policy = { mode: 'workspace-write', workspaceRoot: ws }
  const run = async (argv) => {
    const c = s.provider.confine(argv, policy)
    const p = spawnSync(c.argv[0], c.argv.slice(1), { cwd: ws, encoding: 'utf8' })
    await s.provider.settle(c, { exitCode: p.status, stderr: p.stderr })
    return { c, p }
  }
  // The first call, by a process of its own, names the base; the server started then
  // reads its requests from a FIFO made there.
  const { c: first } = await run(['true'])
  const base = dirname(dirname(first.statusPath))
  const [server] = serverPids().filter((p) => !before.has(p))
  assert.ok(server, 'a server was started after the first call')
  const fifo = readlinkSync(`/proc/${server}/fd/0`)
  assert.ok(fifo.startsWith(`${base}/stockade-serve-`), `${fifo} is not in ${base}`)
  const noted = readFileSync(log, 'utf8').split('\n')
  const capture = noted[noted.indexOf('--stderr') + 1]
  assert.ok(capture.startsWith(`${base}/stockade-settle-`), `${capture} is not in ${base}`)
  // What lies there is out of every command's reach; a file beside the base is read
  // (the control).
  const made = mkdtempSync(join(base, 'stockade-serve-'))
  writeFileSync(join(made, 'requests'), 'a request\n')
  const beside = join(dirname(base), 'beside')
  writeFileSync(beside, 'beside\n')
  try {
    const { p } = await run(['sh', '-c', 'cat "$1"; cat "$2"', 'sh', join(made, 'requests'), beside])
    assert.equal(p.stdout, 'beside\n', p.stderr)
  } finally {
    rmSync(made, { recursive: true, force: true })
    rmSync(beside, { force: true })
  }
  await s.ctx.fiber.dispose()
})

await test('once every provider is disposed, no private directory is left', async () => {
  await h.ctx.fiber.dispose()
  await noDirsLeft()
})

rmSync(root, { recursive: true, force: true })
console.log(results.join('\n'))
if (results.some((r) => r.startsWith('FAIL'))) process.exit(1)
