// bench/executor.mjs: what a confined command costs through the harness's own bash
// executor (@deepseek-ai/dsh-bash-sandbox, unmodified): `shell.run('echo i')` per
// command, wall-clock, with the stockade provider (kept `stockade serve`, and a
// `stockade confine` process per call) and the harness's own local provider
// (`landlock-run`, and bubblewrap where it works), interleaved round by round. Also the
// time each `confine` call holds the event loop (the harness's seam is synchronous).
// Run by bench/executor, which installs the packages; prints a Markdown table.
import { performance } from 'node:perf_hooks'
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { Context } from '@deepseek-ai/cordis'
import LocalSubprocessRuntime from '@deepseek-ai/dsh-subprocess-local'
import SandboxPolicyService from '@deepseek-ai/dsh-sandbox-policy'
import SandboxBashExecutor from '@deepseek-ai/dsh-bash-sandbox'
import LocalSandboxProvider from '@deepseek-ai/dsh-sandbox-local'
import StockadeSandboxProvider from '../dist/index.js'
import { DirectServer } from '../dist/server.js'

const runs = Number(process.env.RUNS ?? 20)
const rounds = Number(process.env.ROUNDS ?? 5)
const root = mkdtempSync(join(process.env.SCRATCH_BASE, 'bench-executor-'))
const ws = join(root, 'ws')
mkdirSync(ws)

async function harness(name, register) {
  const ctx = new Context()
  await ctx.plugin(LocalSubprocessRuntime)
  await ctx.plugin(SandboxPolicyService, { mode: 'workspace-write', workspaceRoot: ws })
  await register(ctx)
  await ctx.plugin(SandboxBashExecutor, { cwd: ws })
  const shell = ctx.get('shell')
  const provider = ctx.get('sandbox')
  const held = []
  const confine = provider.confine.bind(provider)
  provider.confine = (argv, policy) => {
    const t = performance.now()
    try {
      return confine(argv, policy)
    } finally {
      held.push(performance.now() - t)
    }
  }
  const run = (command) => shell.run(shell.resolve({ command }))
  // Warm up, and check it confines and works at all.
  for (let i = 0; i < 5; i++) {
    const r = await run(`echo ${i}`)
    if (r.exitCode !== 0 || r.stdout.text !== `${i}\n`) throw new Error(`${name}: ${JSON.stringify(r)}`)
  }
  held.length = 0
  return { name, ctx, provider, run, held, times: [] }
}

const contenders = []
const add = async (name, register, setup = () => {}) => {
  try {
    const h = await harness(name, async (ctx) => {
      await register(ctx)
      setup(ctx.get('sandbox'))
    })
    contenders.push(h)
  } catch (error) {
    console.error(`bench/executor: ${name} left out: ${error?.message ?? error}`)
  }
}
const stockade = { stockade: process.env.STOCKADE }
await add('stockade, kept `stockade serve` (default)', (ctx) => ctx.plugin(StockadeSandboxProvider, stockade))
// The same server behind a worker thread, as `confine` asked it before it talked to its
// server itself (and as it still does where FIFOs cannot be made): the first call, which
// a `stockade confine` process answers, makes the provider's server, a worker thread's
// while `DirectServer.start` makes none, and the provider keeps that one.
const viaWorker = async (ctx) => {
  await ctx.plugin(StockadeSandboxProvider, stockade)
  const start = DirectServer.start
  DirectServer.start = () => undefined
  try {
    ctx.get('sandbox').confine(['true'], { mode: 'workspace-write', workspaceRoot: ws })
  } finally {
    DirectServer.start = start
  }
}
await add('stockade, kept `stockade serve` behind a worker thread', viaWorker)
await add('stockade, `stockade confine` per call', (ctx) => ctx.plugin(StockadeSandboxProvider, { ...stockade, confineServer: false }))
await add('harness, landlock-run', (ctx) => ctx.plugin(LocalSandboxProvider), (p) => { p.internals.chain = ['landlock'] })
await add('harness, bubblewrap', (ctx) => ctx.plugin(LocalSandboxProvider), (p) => { p.internals.chain = ['bwrap'] })

for (let round = 0; round < rounds; round++) {
  for (const h of contenders) {
    for (let i = 0; i < runs; i++) {
      const t = performance.now()
      const r = await h.run(`echo ${i}`)
      h.times.push(performance.now() - t)
      if (r.exitCode !== 0) throw new Error(`${h.name}: exit ${r.exitCode}: ${r.stderr.text}`)
    }
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const ms = (x) => `${x.toFixed(2)} ms`
const base = contenders.find((h) => h.name === 'harness, landlock-run')
console.log('| provider | per command, median | / landlock-run | confine holds the event loop, median | max |')
console.log('|---|---|---|---|---|')
for (const h of contenders) {
  const ratio = base ? `${(median(h.times) / median(base.times)).toFixed(2)}x` : 'n/a'
  console.log(`| ${h.name} | ${ms(median(h.times))} | ${ratio} | ${ms(median(h.held))} | ${ms(Math.max(...h.held))} |`)
}
console.log(`\n${contenders[0]?.times.length ?? 0} commands each (${rounds} rounds of ${runs}, interleaved); load average at the end: ${(await import('node:os')).loadavg().map((x) => x.toFixed(2)).join(' ')}`)
for (const h of contenders) await h.ctx.fiber.dispose()
rmSync(root, { recursive: true, force: true })
