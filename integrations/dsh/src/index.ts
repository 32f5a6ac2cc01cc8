/**
 * stockade as the harness's Linux confine provider: registers as `ctx.sandbox` in place
 * of `@deepseek-ai/dsh-sandbox-local` and hands the harness's executors the argv that
 * `stockade confine` prints, with stockade's own enforcement, denial dialect and
 * (tagged, unforgeable) runner-failure rules.
 *
 * - `confine(argv, policy)` is synchronous, as the published `SandboxProvider` seam
 *   requires; it runs `stockade confine` with a deadline (`confineTimeoutMs`). Callers
 *   that can await use `confineAsync`, which also honours an `AbortSignal`.
 * - The executor sets cwd and environment when it spawns: the request says so
 *   (`--inherit-cwd --inherit-env`), and the runner applies stockade's environment rule
 *   to what it inherits.
 * - A refusal (`SANDBOX_UNAVAILABLE`, or any failure of `stockade confine`) throws
 *   `SandboxUnavailableError`: never an unconfined passthrough.
 * - Settling: the harness's executor classifies in-process and never reports back, so
 *   the provider removes each private directory itself once the runner has written its
 *   final status record (just before the command starts: nothing writes there again).
 *   `settle()` gives a caller that has the process facts `stockade classify`'s verdict.
 */
import { execFile, execFileSync } from 'node:child_process'
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join } from 'node:path'
import type { Context } from '@deepseek-ai/cordis'
import { SandboxProvider, SandboxUnavailableError } from '@deepseek-ai/dsh-sandbox'
import type { ConfinedArgv, RunnerFailureRule, SandboxEnforcement, SandboxPolicy } from '@deepseek-ai/dsh-sandbox'

export interface Config {
  /** The `stockade` launcher (default: `stockade` on PATH). */
  stockade?: string
  /** Deadline for one `stockade confine` (ms, default 5000). */
  confineTimeoutMs?: number
  /** The environment rule applied to what the runner inherits (default `filtered`). */
  inheritEnv?: 'filtered' | 'unfiltered'
  /** Extra `stockade confine` flags, e.g. `['--network', 'allow']` (see docs). */
  extraArgs?: string[]
  /** How often pending private directories are checked for a final record (ms, default 50). */
  settlePollMs?: number
  /** A private directory whose argv was never spawned is removed after this long (ms, default 300000). */
  abandonAfterMs?: number
}

/** What `stockade confine` prints: the harness's ConfinedArgv plus stockade's facts. */
export interface StockadeConfinedArgv extends ConfinedArgv {
  contract: number
  mode: SandboxPolicy['mode']
  statusPath?: string
  statusChannel?: 'out-of-band' | 'in-band'
  guarantees?: Record<string, { status: string; required: boolean; needs: string }>
}

/** `stockade classify`'s verdict (docs/provider-contract.md, section 2). */
export interface Verdict {
  contract: number
  outcome: 'ok' | 'failed' | 'denied' | 'runner-failed' | 'signaled'
  mode: string
  denied: boolean
  runnerFailed: boolean
  detail: string | null
  enforcement: SandboxEnforcement | null
  evidence: string
}

/** One pending private directory: where it is and since when. */
interface Pending {
  statusPath: string
  since: number
}

const DEFAULTS: Required<Config> = {
  stockade: 'stockade',
  confineTimeoutMs: 5000,
  inheritEnv: 'filtered',
  extraArgs: [] as string[],
  settlePollMs: 50,
  abandonAfterMs: 300_000,
}

export class StockadeSandboxProvider extends SandboxProvider {
  readonly config: Required<Config>
  /**
   * Private directories handed out and not yet removed, by status path (the one field
   * that names the private directory whatever the argv starts with: with the namespace
   * stage, argv begins with the stage and its flags, not the runner's `--request`).
   */
  private readonly pending = new Map<string, Pending>()
  private timer: NodeJS.Timeout | undefined

  constructor(ctx: Context, config: Config = {}) {
    super(ctx)
    this.config = { ...DEFAULTS, ...config }
    ctx.effect(() => () => this.dispose(), 'stockade private directories')
  }

  /** The `stockade confine` arguments for one call. */
  confineArgs(argv: readonly string[], policy: SandboxPolicy): string[] {
    return [
      'confine',
      '--mode', policy.mode,
      '--workspace', policy.workspaceRoot,
      '--inherit-cwd',
      `--inherit-env=${this.config.inheritEnv}`,
      ...this.config.extraArgs,
      '--',
      ...argv,
    ]
  }

  confine(argv: readonly string[], policy: SandboxPolicy): StockadeConfinedArgv {
    let stdout: string
    try {
      stdout = execFileSync(this.config.stockade, this.confineArgs(argv, policy), {
        encoding: 'utf8',
        timeout: this.config.confineTimeoutMs,
        killSignal: 'SIGKILL',
        stdio: ['ignore', 'pipe', 'pipe'],
        cwd: policy.workspaceRoot,
      })
    } catch (error) {
      throw unavailable(policy, error)
    }
    return this.accept(stdout, policy)
  }

  /** `confine`, without blocking the event loop; `signal` or `deadlineMs` abort it. */
  async confineAsync(
    argv: readonly string[],
    policy: SandboxPolicy,
    options: { signal?: AbortSignal; deadlineMs?: number } = {},
  ): Promise<StockadeConfinedArgv> {
    options.signal?.throwIfAborted()
    const stdout = await new Promise<string>((resolve, reject) => {
      execFile(this.config.stockade, this.confineArgs(argv, policy), {
        encoding: 'utf8',
        timeout: options.deadlineMs ?? this.config.confineTimeoutMs,
        killSignal: 'SIGKILL',
        signal: options.signal,
        cwd: policy.workspaceRoot,
      }, (error, out, stderr) => {
        if (options.signal?.aborted) return reject(options.signal.reason)
        if (error) return reject(unavailable(policy, Object.assign(error, { stderr })))
        resolve(out)
      })
    })
    return this.accept(stdout, policy)
  }

  /** `stockade probe --json`: kernel facts and, per mode, the verdict and guarantees. */
  async probe(): Promise<unknown> {
    return new Promise((resolve, reject) => {
      execFile(this.config.stockade, ['probe', '--json'], { encoding: 'utf8', timeout: this.config.confineTimeoutMs },
        (error, out) => error ? reject(error) : resolve(JSON.parse(out)))
    })
  }

  /**
   * The verdict on one settled process spawned from `confined`: `stockade classify`,
   * which reads the runner's status record while the private directory is still there
   * (and removes it), else judges by the exit rules, whose runner-failure signature
   * carries the per-command tag and so cannot be forged either.
   */
  async settle(
    confined: StockadeConfinedArgv,
    facts: { exitCode: number | null; signal?: string | null; stderr: string },
  ): Promise<Verdict> {
    if (confined.statusPath !== undefined) this.pending.delete(confined.statusPath)
    // The stderr classify reads lives outside every writable root (never under /tmp,
    // which workspace-write grants): a command's leftover process could otherwise
    // rewrite another command's capture, or swap it for a FIFO, before classify reads it.
    const scratch = mkdtempSync(join(privateBase(), 'stockade-settle-'))
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
      return JSON.parse(out) as Verdict
    } finally {
      rmSync(scratch, { recursive: true, force: true })
    }
  }

  /** Removes every private directory this provider still tracks. */
  dispose(): void {
    if (this.timer !== undefined) clearInterval(this.timer)
    this.timer = undefined
    for (const statusPath of [...this.pending.keys()]) this.remove(statusPath)
  }

  /** Parses the ConfinedArgv and starts tracking its private directory. */
  private accept(stdout: string, policy: SandboxPolicy): StockadeConfinedArgv {
    let confined: StockadeConfinedArgv
    try {
      confined = JSON.parse(stdout) as StockadeConfinedArgv
    } catch (error) {
      throw new SandboxUnavailableError(policy.mode, `stockade confine printed no ConfinedArgv: ${String(error)}`)
    }
    if (confined.contract !== 2 || !Array.isArray(confined.argv) || confined.enforcement === undefined) {
      throw new SandboxUnavailableError(policy.mode, 'stockade confine printed an unexpected ConfinedArgv')
    }
    if (confined.statusPath !== undefined) {
      this.pending.set(confined.statusPath, { statusPath: confined.statusPath, since: Date.now() })
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
   * Removes each private directory whose runner wrote its final record (`confined` just
   * before execve, or `failed`): nothing will write there again. One never spawned is
   * removed after `abandonAfterMs` (spawning it later is then a runner failure).
   */
  private sweep(): void {
    const now = Date.now()
    for (const [statusPath, p] of this.pending) {
      const record = this.readRecord(statusPath)
      if (record !== undefined && record.length > 0) {
        this.remove(statusPath)
      } else if (now - p.since > this.config.abandonAfterMs) {
        this.remove(statusPath)
      }
    }
    if (this.pending.size === 0 && this.timer !== undefined) {
      clearInterval(this.timer)
      this.timer = undefined
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
 * the request, the runner's status record, the namespace stage's report, and the
 * domain proxy's record of refused connections.
 */
const PRIVATE_FILES = ['request', 'status', 'stage', 'network-denied'] as const

/** A failed `stockade confine` as the harness's fail-closed error. */
function unavailable(policy: SandboxPolicy, error: unknown): SandboxUnavailableError {
  const stderr = (error as { stderr?: string | Buffer }).stderr
  const line = String(stderr ?? '').split(/\r?\n/).find((l) => l.startsWith('stockade: '))
  return new SandboxUnavailableError(policy.mode, line ?? String(error))
}

export type { RunnerFailureRule }
export default StockadeSandboxProvider

/**
 * Where `settle` keeps its scratch file: `$XDG_RUNTIME_DIR` (the user's private runtime
 * directory) when set, else `~/.local/state` (made 0700 if missing), the places stockade
 * keeps its own control files, which no default policy grants.
 */
function privateBase(): string {
  const runtime = process.env.XDG_RUNTIME_DIR
  if (runtime !== undefined && runtime.startsWith('/')) return runtime
  const state = join(homedir(), '.local', 'state')
  mkdirSync(state, { recursive: true, mode: 0o700 })
  return state
}
