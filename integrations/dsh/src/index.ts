/**
 * stockade as the harness's Linux confine provider: registers as `ctx.sandbox` in place
 * of `@deepseek-ai/dsh-sandbox-local` and hands the harness's executors the argv that
 * `stockade confine` prints, with stockade's own enforcement, denial dialect and
 * (tagged, unforgeable) runner-failure rules.
 *
 * - `confine(argv, policy)` is synchronous, as the published `SandboxProvider` seam
 *   requires, with a deadline (`confineTimeoutMs`). Callers that can await use
 *   `confineAsync`, which also honours an `AbortSignal`. Each asks a `stockade serve`
 *   process the provider keeps (its stdin and stdout, FIFOs or pipes only the provider
 *   holds; `server.ts`): a process start per command was most of what confining cost,
 *   and the event loop waited for all of it. `confine` talks to its server from the main
 *   thread itself, so the loop waits for the server's work only; `confineAsync` through
 *   a worker thread. `confineServer: false` starts `stockade confine` per call instead.
 *   A call that finds no server (the first, or one after the server died) is answered
 *   by a `stockade confine` process, and a server is started for the next calls, its
 *   FIFOs in the control base that answer names; a server past the deadline is killed;
 *   either way the call fails closed, never unconfined.
 * - The executor sets cwd and environment when it spawns: the request says so
 *   (`--inherit-cwd --inherit-env`), and the runner applies stockade's environment rule
 *   to what it inherits.
 * - A refusal (`SANDBOX_UNAVAILABLE`, or any failure of `stockade confine`) throws
 *   `SandboxUnavailableError`: never an unconfined passthrough.
 * - Settling: `settle()` gives a caller that has the process facts `stockade classify`'s
 *   verdict, which rests on what the private directory holds after the command ended
 *   (the runner's status record, the namespace stage's report, the proxy's record of
 *   refused connections). So a directory is kept until `settle()` reads it (or
 *   `dispose()`), whatever the command's duration: removing it earlier makes the verdict
 *   `tampered` ("gone before its time"). The harness's own executor classifies
 *   in-process and never reports back, so what is kept is bounded: the request goes as
 *   soon as the runner has written its record, a directory whose command started is
 *   removed after `keepForMs` (1 h), at most `maxKept` (256) are kept (the oldest go
 *   first), and one never spawned goes after `abandonAfterMs` (5 min). `settle()` on a
 *   directory removed that way rejects, naming why, rather than guess a verdict.
 * - The journal: a policy that carries a `journalKey` (the caller's own id for the call,
 *   saved before it asks) is confined with `--journal KEY`; `settle()` then records the
 *   verdict under it (stockade classify does), and after a crash `outcome(key)` answers
 *   `not-started`, `finished` (with the verdict and its receipt) or `unknown`. The
 *   harness's policy carries no per-call id, so keys are the caller's to give.
 */
import { execFile, execFileSync } from 'node:child_process'
import { lstatSync, mkdtempSync, readFileSync, rmdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type { Context } from '@deepseek-ai/cordis'
import z from '@deepseek-ai/schemastery'
import { SandboxProvider, SandboxUnavailableError } from '@deepseek-ai/dsh-sandbox'
import type { ConfinedArgv, RunnerFailureRule, SandboxEnforcement, SandboxPolicy } from '@deepseek-ai/dsh-sandbox'
import { DirectServer, privateBase, WorkerServer } from './server.js'
import type { ServerAnswer } from './server.js'

export interface Config {
  /** The `stockade` launcher (default: `stockade` on PATH). */
  stockade?: string
  /** Deadline for one `stockade confine` (ms, default 5000). */
  confineTimeoutMs?: number
  /** Answer `confine` from one kept `stockade serve` process (default true) rather than a process per call. */
  confineServer?: boolean
  /** The environment rule applied to what the runner inherits (default `filtered`). */
  inheritEnv?: 'filtered' | 'unfiltered'
  /**
   * Variables the executor passes on purpose that stockade's environment rule would
   * withhold (a forwarded `GH_TOKEN`): each becomes `--keep-env NAME`.
   */
  keepEnv?: string[]
  /** Extra `stockade confine` flags, e.g. `['--network', 'allow']` (see docs). */
  extraArgs?: string[]
  /** How often pending private directories are checked for a final record (ms, default 50). */
  settlePollMs?: number
  /** A private directory whose argv was never spawned is removed after this long (ms, default 300000). */
  abandonAfterMs?: number
  /** How long a started command's private directory is kept for `settle()` (ms, default 3600000). */
  keepForMs?: number
  /** The most private directories kept at once; past it the oldest go first (default 256). */
  maxKept?: number
}

/** What `stockade confine` prints: the harness's ConfinedArgv plus stockade's facts. */
export interface StockadeConfinedArgv extends ConfinedArgv {
  contract: number
  mode: SandboxPolicy['mode']
  statusPath?: string
  statusChannel?: 'out-of-band' | 'in-band'
  /** The policy's `journalKey`, when it had one: `settle()` records the verdict under it. */
  journal?: string
  guarantees?: Record<string, { status: string; required: boolean; needs: string }>
}

/**
 * A per-call policy with the stockade extension: `journalKey`, the caller's id for this
 * call (1-64 ASCII letters, digits, `-` and `_`, new for every call), which records the
 * request in stockade's journal (`confine --journal KEY`; docs/provider-contract.md,
 * section 9).
 */
export interface StockadePolicy extends SandboxPolicy {
  journalKey?: string
}

/** `stockade outcome KEY` (docs/provider-contract.md, section 9). */
export interface JournalOutcome {
  key: string
  /**
   * `not-started`: provably nothing ran (safe to run again, under a new key);
   * `finished`: `result` is the verdict `settle()` was given, with its receipt;
   * `unknown`: it may have run and had effects (spawned and never settled): never assume.
   */
  state: 'not-started' | 'finished' | 'unknown'
  reason: string
  requested: { key: string; by: 'run' | 'confine'; created: number; mode: string; argv: string[]; cwd: string; requestDir: string | null }
  result: Verdict | null
}

/** The keys stockade accepts (it checks again: this only fails before running anything). */
const JOURNAL_KEY = /^[A-Za-z0-9_-]{1,64}$/

/** `stockade classify`'s verdict (docs/provider-contract.md, section 2). */
export interface Verdict {
  contract: number
  outcome: 'ok' | 'failed' | 'denied' | 'runner-failed' | 'signaled' | 'tampered'
  mode: string
  denied: boolean
  runnerFailed: boolean
  detail: string | null
  enforcement: SandboxEnforcement | null
  evidence: string
  /** Default protected names the command created (the namespace stage's report), when there were any. */
  protectedAppeared?: string[]
  /** Connections the filtering proxy refused (with `--allow-domain`), when there were any. */
  network?: { denied: Array<{ host: string; port: number; reason: string }>; moreDenied: boolean }
  /** The receipt fields an executor's process allows (docs/provider-contract.md, section 8). */
  receipt?: Record<string, unknown>
  /**
   * Variables of the executor's environment that stockade's rule withheld from the
   * command, by name (never values), when there were any; `envRemovedMore` counts those
   * the runner's record had no room to name.
   */
  envRemoved?: string[]
  envRemovedMore?: number
  /** Added by `settle()`: sentences for the agent, when there is something to tell it. */
  notices?: string[]
}

/** One private directory handed out: where it is, since when, and since when its runner's record is written. */
interface Pending {
  statusPath: string
  since: number
  /** When the sweep first found the runner's record (its command started, or the runner failed). */
  recorded?: number
}

const DEFAULTS: Required<Config> = {
  stockade: 'stockade',
  confineTimeoutMs: 5000,
  confineServer: true,
  inheritEnv: 'filtered',
  keepEnv: [] as string[],
  extraArgs: [] as string[],
  settlePollMs: 50,
  abandonAfterMs: 300_000,
  keepForMs: 3_600_000,
  maxKept: 256,
}

/** How many removals by the bounds `settle()` remembers, to say why it has no verdict. */
const REMEMBERED_REMOVALS = 1024

export class StockadeSandboxProvider extends SandboxProvider {
  /** The plugin's configuration, as the harness's plugins declare theirs (defaults above). */
  static Config: z<Config> = z.object({
    stockade: z.string().default(DEFAULTS.stockade),
    confineTimeoutMs: z.natural().default(DEFAULTS.confineTimeoutMs),
    confineServer: z.boolean().default(DEFAULTS.confineServer),
    inheritEnv: z.union(['filtered', 'unfiltered'] as const).default(DEFAULTS.inheritEnv),
    keepEnv: z.array(z.string()).default([]),
    extraArgs: z.array(z.string()).default([]),
    settlePollMs: z.natural().default(DEFAULTS.settlePollMs),
    abandonAfterMs: z.natural().default(DEFAULTS.abandonAfterMs),
    keepForMs: z.natural().default(DEFAULTS.keepForMs),
    maxKept: z.natural().default(DEFAULTS.maxKept),
  })

  readonly config: Required<Config>
  /**
   * Private directories handed out and not yet removed, by status path (the one field
   * that names the private directory whatever the argv starts with: with the namespace
   * stage, argv begins with the stage and its flags, not the runner's `--request`).
   */
  private readonly pending = new Map<string, Pending>()
  /** Directories the bounds removed before `settle()`, by status path: why (oldest first). */
  private readonly removedEarly = new Map<string, string>()
  private timer: NodeJS.Timeout | undefined
  /** The kept `stockade serve` of `confine`, started by the first call (`confineServer`). */
  private server: DirectServer | WorkerServer | undefined
  /** The kept `stockade serve` of `confineAsync`, started by its first call. */
  private asyncServer: WorkerServer | undefined

  constructor(ctx: Context, config: Config = {}) {
    super(ctx)
    this.config = { ...DEFAULTS, ...config }
    ctx.effect(() => () => this.dispose(), 'stockade private directories')
  }

  /**
   * The `stockade confine` arguments for one call. Read-only mode writes nowhere, so a
   * workspace that does not exist (yet) is no reason to refuse: stockade then takes the
   * provider's working directory as the workspace (it grants nothing but reading there).
   */
  confineArgs(argv: readonly string[], policy: StockadePolicy): string[] {
    const journal = policy.journalKey === undefined ? [] : ['--journal', checkedKey(policy.journalKey)]
    const workspace = policy.mode === 'read-only' && !isDirectory(policy.workspaceRoot)
      ? []
      : ['--workspace', policy.workspaceRoot]
    return [
      'confine',
      '--mode', policy.mode,
      ...workspace,
      '--inherit-cwd',
      `--inherit-env=${this.config.inheritEnv}`,
      ...this.config.keepEnv.flatMap((name) => ['--keep-env', name]),
      ...this.config.extraArgs,
      ...journal,
      '--',
      ...argv,
    ]
  }

  /**
   * Where `stockade confine` runs: the workspace, or where it is missing in read-only
   * mode the provider's own directory. A missing workspace in a writing mode is refused
   * naming it (spawning there would fail as if the stockade binary were missing).
   */
  private confineCwd(policy: SandboxPolicy): string | undefined {
    if (isDirectory(policy.workspaceRoot)) return policy.workspaceRoot
    if (policy.mode === 'read-only') return undefined
    throw new SandboxUnavailableError(policy.mode, `stockade: workspace root ${policy.workspaceRoot} does not exist or is not a directory`)
  }

  confine(argv: readonly string[], policy: StockadePolicy): StockadeConfinedArgv {
    const cwd = this.confineCwd(policy)
    const args = this.confineArgs(argv, policy)
    if (this.config.confineServer) {
      const answer = this.syncServer()?.ask(cwd, args, this.config.confineTimeoutMs)
      // Asked by a process of its own when there is no server, or the one there ended
      // without an answer (killed, or its file replaced by an upgrade: the request was
      // never written then). That answer names the control base, where the next
      // server's channel is made.
      if (answer !== undefined && !('lost' in answer && answer.restart)) return this.answered(answer, policy)
      const confined = this.confineByProcess(args, cwd, policy)
      this.startSyncServer(confined)
      return confined
    }
    return this.confineByProcess(args, cwd, policy)
  }

  /** `stockade confine` as a process of its own, waited for. */
  private confineByProcess(args: string[], cwd: string | undefined, policy: StockadePolicy): StockadeConfinedArgv {
    let stdout: string
    try {
      stdout = execFileSync(this.config.stockade, args, {
        encoding: 'utf8',
        timeout: this.config.confineTimeoutMs,
        killSignal: 'SIGKILL',
        stdio: ['ignore', 'pipe', 'pipe'],
        cwd,
      })
    } catch (error) {
      // Killed at the deadline: said as a server past it is.
      if ((error as NodeJS.ErrnoException).code === 'ETIMEDOUT') {
        throw new SandboxUnavailableError(policy.mode, `stockade confine: no answer within ${this.config.confineTimeoutMs} ms`)
      }
      throw unavailable(policy, error)
    }
    return this.accept(stdout, policy)
  }

  /** `confine`, without blocking the event loop; `signal` or `deadlineMs` abort it. */
  async confineAsync(
    argv: readonly string[],
    policy: StockadePolicy,
    options: { signal?: AbortSignal; deadlineMs?: number } = {},
  ): Promise<StockadeConfinedArgv> {
    options.signal?.throwIfAborted()
    const cwd = this.confineCwd(policy)
    const args = this.confineArgs(argv, policy)
    const deadline = options.deadlineMs ?? this.config.confineTimeoutMs
    if (this.config.confineServer) {
      let answer = await this.asyncServerNow().askAsync(cwd, args, deadline, options.signal)
      if ('lost' in answer && answer.restart) answer = await this.asyncServerNow().askAsync(cwd, args, deadline, options.signal)
      if (options.signal?.aborted) {
        // Prepared, but nobody will spawn it: its directory goes now.
        this.withdraw(answer)
        throw options.signal.reason
      }
      return this.answered(answer, policy)
    }
    const stdout = await new Promise<string>((resolve, reject) => {
      execFile(this.config.stockade, args, {
        encoding: 'utf8',
        timeout: deadline,
        killSignal: 'SIGKILL',
        signal: options.signal,
        cwd,
      }, (error, out, stderr) => {
        if (options.signal?.aborted) return reject(options.signal.reason)
        if (error) return reject(unavailable(policy, Object.assign(error, { stderr })))
        resolve(out)
      })
    })
    return this.accept(stdout, policy)
  }

  /**
   * The kept server of `confine`, unless there is none or the environment it was started
   * with changed (it is closed then).
   */
  private syncServer(): DirectServer | WorkerServer | undefined {
    if (this.server?.usable(JSON.stringify(process.env)) === true) return this.server
    this.server?.close()
    this.server = undefined
    return undefined
  }

  /**
   * Starts the kept server of `confine`: one the main thread talks to itself, over FIFOs
   * made in the control base that `confined`'s private directory lies in (stockade hides
   * it from every confined command, so none can open them while they have names); or,
   * where FIFOs cannot be made or `confined` has no private directory, one behind a
   * worker thread.
   */
  private startSyncServer(confined: StockadeConfinedArgv): void {
    const env = JSON.stringify(process.env)
    const base = controlBase(confined)
    // One that lost its process (a worker's keeps its thread) goes first.
    this.server?.close()
    const direct = base === undefined ? undefined : DirectServer.start(this.config.stockade, env, base)
    this.server = direct ?? this.workerServer(env)
  }

  /** The kept server of `confineAsync`, new as `syncServerNow`'s. */
  private asyncServerNow(): WorkerServer {
    const env = JSON.stringify(process.env)
    if (this.asyncServer?.usable(env) !== true) {
      this.asyncServer?.close()
      this.asyncServer = this.workerServer(env)
    }
    return this.asyncServer
  }

  private workerServer(env: string): WorkerServer {
    return new WorkerServer(this.config.stockade, env, (line) => this.withdraw({ line }))
  }

  /** A server's answer as the ConfinedArgv, or the fail-closed error. */
  private answered(answer: ServerAnswer, policy: SandboxPolicy): StockadeConfinedArgv {
    if ('lost' in answer) throw new SandboxUnavailableError(policy.mode, `stockade serve: ${answer.lost}`)
    let parsed: { confined?: StockadeConfinedArgv; error?: string }
    try {
      parsed = JSON.parse(answer.line)
    } catch (error) {
      throw new SandboxUnavailableError(policy.mode, `stockade serve answered no JSON: ${String(error)}`)
    }
    if (parsed.confined === undefined) throw new SandboxUnavailableError(policy.mode, parsed.error ?? 'stockade serve answered neither a ConfinedArgv nor an error')
    return this.acceptConfined(parsed.confined, policy)
  }

  /** Removes the private directory of a ConfinedArgv that will never be handed out. */
  private withdraw(answer: ServerAnswer): void {
    if ('lost' in answer) return
    try {
      const statusPath = (JSON.parse(answer.line) as { confined?: StockadeConfinedArgv }).confined?.statusPath
      if (statusPath !== undefined) this.remove(statusPath)
    } catch {
      // Not a ConfinedArgv: nothing was prepared.
    }
  }

  /** `stockade probe --json`: kernel facts and, per mode, the verdict and guarantees. */
  async probe(): Promise<unknown> {
    return new Promise((resolve, reject) => {
      execFile(this.config.stockade, ['probe', '--json'], { encoding: 'utf8', timeout: this.config.confineTimeoutMs },
        (error, out) => error ? reject(error) : resolve(JSON.parse(out)))
    })
  }

  /**
   * After a crash: what became of the call confined with `journalKey: key`
   * (`stockade outcome KEY`). `undefined`: no record under the key (confine never
   * recorded it, so no ConfinedArgv was handed out and nothing ran; or it was swept after
   * 24 hours). An unconsumed request is withdrawn by the asking, so `not-started` stays
   * true. A directory the bounds removed before its command started answers `unknown`.
   */
  async outcome(key: string): Promise<JournalOutcome | undefined> {
    const args = ['outcome', checkedKey(key)]
    return new Promise((resolve, reject) => {
      execFile(this.config.stockade, args, { encoding: 'utf8', timeout: this.config.confineTimeoutMs },
        (error, out, stderr) => {
          if (!error) return resolve(JSON.parse(out) as JournalOutcome)
          const line = String(stderr).split(/\r?\n/).find((l) => l.startsWith('stockade: '))
          if (error.code === 125 && line?.includes('no request')) return resolve(undefined)
          reject(new Error(line ?? String(error)))
        })
    })
  }

  /**
   * The verdict on one settled process spawned from `confined`: `stockade classify`,
   * which reads the runner's status record, the stage's report and the proxy's record
   * from the private directory this provider kept for it (and removes it), else judges
   * by the exit rules, whose runner-failure signature carries the per-command tag and so
   * cannot be forged either. Rejects when the bounds (`keepForMs`, `maxKept`,
   * `abandonAfterMs`) removed the directory already: classify would have to call that
   * `tampered`, which it is not. With a `journalKey`, stockade records the verdict
   * under it before removing the directory (`outcome(key)` then answers `finished`).
   */
  async settle(
    confined: StockadeConfinedArgv,
    facts: { exitCode: number | null; signal?: string | null; stderr: string },
  ): Promise<Verdict> {
    const removed = confined.statusPath === undefined ? undefined : this.removedEarly.get(confined.statusPath)
    if (removed !== undefined) {
      throw new Error(`stockade: no verdict for ${confined.statusPath}: its private directory was removed ${removed} before settle()`)
    }
    // Out of the sweep's hands from here: classify reads the directory, then removes it.
    if (confined.statusPath !== undefined) this.pending.delete(confined.statusPath)
    // The stderr classify reads lives outside every writable root (never under /tmp,
    // which workspace-write grants): a command's leftover process could otherwise
    // rewrite another command's capture, or swap it for a FIFO, before classify reads it.
    // And in the control base, which stockade hides from every confined command: other
    // commands of this user must not read this one's output.
    const scratch = mkdtempSync(join(controlBase(confined) ?? privateBase(), 'stockade-settle-'))
    try {
      const stderrFile = join(scratch, 'stderr')
      writeFileSync(stderrFile, facts.stderr, { mode: 0o600 })
      const args = ['classify', '--confined', '-', '--stderr', stderrFile]
      if (facts.exitCode === null) args.push('--signal', facts.signal ?? 'SIGKILL')
      else args.push('--exit-code', String(facts.exitCode))
      const out = await new Promise<string>((resolve, reject) => {
        const child = execFile(this.config.stockade, args, { encoding: 'utf8', timeout: this.config.confineTimeoutMs },
          (error, stdout) => error ? reject(error) : resolve(stdout))
        child.stdin?.end(JSON.stringify(confined))
      })
      return withNotices(JSON.parse(out) as Verdict)
    } finally {
      rmSync(scratch, { recursive: true, force: true })
      // classify removes the directory it read; should it have failed, nothing else will.
      if (confined.statusPath !== undefined) this.remove(confined.statusPath)
    }
  }

  /** Removes every private directory this provider still tracks. */
  dispose(): void {
    this.server?.close()
    this.server = undefined
    this.asyncServer?.close()
    this.asyncServer = undefined
    if (this.timer !== undefined) clearInterval(this.timer)
    this.timer = undefined
    for (const statusPath of [...this.pending.keys()]) this.removeEarly(statusPath, 'on dispose()')
  }

  /** Parses the ConfinedArgv and starts tracking its private directory. */
  private accept(stdout: string, policy: SandboxPolicy): StockadeConfinedArgv {
    let confined: StockadeConfinedArgv
    try {
      confined = JSON.parse(stdout) as StockadeConfinedArgv
    } catch (error) {
      throw new SandboxUnavailableError(policy.mode, `stockade confine printed no ConfinedArgv: ${String(error)}`)
    }
    return this.acceptConfined(confined, policy)
  }

  /** Checks the ConfinedArgv and starts tracking its private directory. */
  private acceptConfined(confined: StockadeConfinedArgv, policy: SandboxPolicy): StockadeConfinedArgv {
    if (confined.contract !== 2 || !Array.isArray(confined.argv) || confined.enforcement === undefined) {
      throw new SandboxUnavailableError(policy.mode, 'stockade confine printed an unexpected ConfinedArgv')
    }
    if (confined.statusPath !== undefined) {
      this.pending.set(confined.statusPath, { statusPath: confined.statusPath, since: Date.now() })
      this.keepWithinBound()
      this.watch()
    }
    return confined
  }

  private watch(): void {
    if (this.timer !== undefined) return
    this.timer = setInterval(() => this.sweep(), this.config.settlePollMs)
    this.timer.unref()
  }

  /**
   * Keeps what `settle()` needs and bounds the rest. Once the runner has written its
   * record (`confined` just before execve, or `failed`) the request is gone (the runner
   * consumes it) and is removed by name should it not be; the directory itself stays for
   * the verdict, until `keepForMs` after the record. One never spawned is removed after
   * `abandonAfterMs` (spawning it later is then a runner failure). Past `maxKept`, the
   * oldest go first: those whose command started, then those never spawned.
   */
  private sweep(): void {
    const now = Date.now()
    for (const [statusPath, p] of this.pending) {
      if (p.recorded === undefined) {
        const record = this.readRecord(statusPath)
        if (record !== undefined && record.length > 0) {
          p.recorded = now
          rmSync(join(dirname(statusPath), 'request'), { force: true })
        } else if (now - p.since > this.config.abandonAfterMs) {
          this.removeEarly(statusPath, `after abandonAfterMs (${this.config.abandonAfterMs} ms) without a spawn`)
        }
      } else if (now - p.recorded > this.config.keepForMs) {
        this.removeEarly(statusPath, `after keepForMs (${this.config.keepForMs} ms)`)
      }
    }
    this.keepWithinBound()
    if (this.pending.size === 0 && this.timer !== undefined) {
      clearInterval(this.timer)
      this.timer = undefined
    }
  }

  /** Removes the oldest directories past `maxKept`: started ones first, by start. */
  private keepWithinBound(): void {
    const excess = this.pending.size - this.config.maxKept
    if (excess <= 0) return
    const order = (p: Pending) => p.recorded === undefined ? [1, p.since] : [0, p.recorded]
    const oldest = [...this.pending.values()].sort((a, b) => {
      const [x, y] = [order(a), order(b)]
      return x[0] - y[0] || x[1] - y[1]
    })
    for (const p of oldest.slice(0, excess)) {
      this.removeEarly(p.statusPath, `to keep within maxKept (${this.config.maxKept})`)
    }
  }

  /** Removes a directory before `settle()`, remembering why (a bounded memory). */
  private removeEarly(statusPath: string, why: string): void {
    this.remove(statusPath)
    this.removedEarly.set(statusPath, why)
    for (const old of this.removedEarly.keys()) {
      if (this.removedEarly.size <= REMEMBERED_REMOVALS) break
      this.removedEarly.delete(old)
    }
  }

  private readRecord(statusPath: string | undefined): string | undefined {
    if (statusPath === undefined) return undefined
    try {
      return readFileSync(statusPath, 'utf8')
    } catch {
      return undefined
    }
  }

  /**
   * Removes one private directory: its files by name, then the directory, never
   * recursively and only when it is still a real directory (not a symlink) that we own,
   * so a command that could reach an in-band directory cannot turn the removal into a
   * deletion elsewhere.
   */
  private remove(statusPath: string): void {
    this.pending.delete(statusPath)
    const dir = dirname(statusPath)
    try {
      const st = lstatSync(dir)
      if (!st.isDirectory() || st.uid !== process.getuid?.()) return
      for (const name of PRIVATE_FILES) rmSync(join(dir, name), { force: true })
      rmdirSync(dir)
    } catch {
      // Gone already, or not ours to remove: stockade's own sweep handles leftovers.
    }
  }
}

/**
 * Every file a private directory can hold (docs/provider-contract.md, "The status file"):
 * the request, the runner's status record, the namespace stage's report, the domain
 * proxy's record of refused connections, the policy's scope `classify` names
 * refusals with, and the request `stockade outcome` withdrew.
 */
const PRIVATE_FILES = ['request', 'status', 'stage', 'network-denied', 'scope', 'withdrawn'] as const

/** `key` when stockade would take it as a journal key; throws (running nothing) otherwise. */
function checkedKey(key: string): string {
  if (!JOURNAL_KEY.test(key)) {
    throw new TypeError(`stockade journal key ${JSON.stringify(key)}: 1 to 64 ASCII letters, digits, - and _ only`)
  }
  return key
}

/**
 * The control base `confined`'s private directory lies in (its status file's
 * grandparent), which stockade hides from every confined command; none without one.
 */
function controlBase(confined: StockadeConfinedArgv): string | undefined {
  return confined.statusPath === undefined ? undefined : dirname(dirname(confined.statusPath))
}

/** Whether `path` is a directory (following links, as a spawn's cwd does). */
function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}

/**
 * The verdict with what the agent should be told: the variables withheld from the
 * command's environment, by name, and how to pass one on purpose. Without it a forwarded
 * credential (a `GH_TOKEN`) vanishes without a word, and the agent takes the command's
 * failure to authenticate for something else.
 */
export function withNotices(verdict: Verdict): Verdict {
  const names = verdict.envRemoved ?? []
  const more = verdict.envRemovedMore ?? 0
  if (names.length === 0 && more === 0) return verdict
  const listed = names.join(', ') + (more > 0 ? `${names.length > 0 ? ' and ' : ''}${more} more` : '')
  const notice = `stockade withheld from the command's environment: ${listed} (secret-looking variables are removed; the provider's keepEnv setting passes one on purpose)`
  return { ...verdict, notices: [...(verdict.notices ?? []), notice] }
}

/** A failed `stockade confine` as the harness's fail-closed error. */
function unavailable(policy: SandboxPolicy, error: unknown): SandboxUnavailableError {
  const stderr = (error as { stderr?: string | Buffer }).stderr
  const line = String(stderr ?? '').split(/\r?\n/).find((l) => l.startsWith('stockade: '))
  return new SandboxUnavailableError(policy.mode, line ?? String(error))
}

export type { RunnerFailureRule }
export default StockadeSandboxProvider

