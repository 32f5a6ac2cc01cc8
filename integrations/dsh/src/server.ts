/**
 * The provider's kept `stockade serve` processes and the channels to them.
 *
 * - `DirectServer` answers the synchronous `confine`: the main thread writes the request
 *   to a FIFO the server reads as its stdin and reads the answer from a FIFO that is
 *   the server's stdout, itself, blocking. The event loop is held for the server's work
 *   and two wake-ups, nothing more (the worker's hops cost as much again as the work).
 *   A watchdog thread keeps the deadline (to within `WATCH_EVERY_MS`, looking for asks
 *   rather than woken by each): past it, it kills the server's process group, whose end
 *   closes the FIFO and ends the blocking read.
 * - `WorkerServer` answers `confineAsync` (and the synchronous `confine` where FIFOs
 *   cannot be made): a worker thread owns the server's pipes.
 *
 * Every descriptor is opened close-on-exec by Node, so no command the harness spawns
 * inherits a way to the servers.
 */
import { spawn, spawnSync } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { MessageChannel, receiveMessageOnPort, Worker } from 'node:worker_threads'
import type { MessagePort } from 'node:worker_threads'
import { closeSync, constants, fstatSync, mkdirSync, mkdtempSync, openSync, readSync, rmSync, writeSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'

/**
 * Where `settle` keeps its scratch file for a command without a private directory (an
 * unconfined one; the others' go to their control base): `$XDG_RUNTIME_DIR` (the user's
 * private runtime directory) when set, else `~/.local/state` (made 0700 if missing),
 * which no default policy grants.
 */
export function privateBase(): string {
  const runtime = process.env.XDG_RUNTIME_DIR
  if (runtime !== undefined && runtime.startsWith('/')) return runtime
  const state = join(homedir(), '.local', 'state')
  mkdirSync(state, { recursive: true, mode: 0o700 })
  return state
}

/**
 * One answer of `stockade serve` (a JSON line), or why there is none; `restart`: the
 * server ended before the request could be answered, so asking a new one is safe.
 */
export type ServerAnswer = { line: string } | { lost: string; restart: boolean }

/**
 * The worker thread that talks to `stockade serve`: it starts the server (again, after
 * one ended), writes each request as a line and hands each answer line back, in order:
 * on the shared port with the flag set for a synchronous caller, as a message for an
 * asynchronous one. A worker, because a synchronous `confine` blocks the main thread,
 * whose event loop could then not read the answer (it waits in `Atomics.wait`, with the
 * deadline, and takes the answer with `receiveMessageOnPort`).
 */
const SERVER_WORKER = `
const { workerData, parentPort } = require('node:worker_threads')
const { spawn } = require('node:child_process')
const { flag, syncPort, stockade, env } = workerData
let child = null
let buffer = ''
let waiting = []
const lose = (why) => {
  // Its pid may be another process's soon: nothing is to be sent to it any more.
  Atomics.store(flag, 1, 0)
  const orphans = waiting
  waiting = []
  child = null
  buffer = ''
  for (const deliver of orphans) deliver({ lost: why, restart: true })
}
const start = () => {
  // Its own process group, so that a kill past the deadline reaches what it forked.
  const c = spawn(stockade, ['serve'], { stdio: ['pipe', 'pipe', 'pipe'], env: JSON.parse(env), cwd: '/', detached: true })
  child = c
  let stderr = ''
  c.stderr.setEncoding('utf8')
  c.stderr.on('data', (d) => { stderr = (stderr + d).slice(-4096) })
  c.stdout.setEncoding('utf8')
  c.stdout.on('data', (d) => {
    buffer += d
    for (let i = buffer.indexOf('\\n'); i >= 0; i = buffer.indexOf('\\n')) {
      const line = buffer.slice(0, i)
      buffer = buffer.slice(i + 1)
      waiting.shift()?.({ line })
    }
  })
  c.stdin.on('error', () => {})
  c.on('error', (e) => { if (child === c) lose(String(e)) })
  c.on('close', (code, signal) => {
    if (child !== c) return
    const said = stderr.split('\\n').find((l) => l.startsWith('stockade: '))
    lose(said ?? 'stockade serve ended (' + (signal ?? code) + ')')
  })
  Atomics.store(flag, 1, c.pid ?? 0)
}
parentPort.on('message', ({ id, cwd, args, sync }) => {
  if (child === null) start()
  waiting.push((answer) => {
    if (!sync) return parentPort.postMessage({ id, ...answer })
    syncPort.postMessage({ id, ...answer })
    Atomics.store(flag, 0, id)
    Atomics.notify(flag, 0)
  })
  child.stdin.write(JSON.stringify({ cwd, args }) + '\\n')
})
`

/**
 * The provider's kept `stockade serve`, behind its worker thread. Requests carry the
 * arguments after `confine` and the directory `stockade confine` would have run in; the
 * server's environment is the provider's as it was when the server started (`usable`
 * is false once it changed: a new server is started with the new one).
 */
export class WorkerServer {
  private readonly worker: Worker
  /** [0]: the id of the last synchronous answer posted; [1]: the server's pid. */
  private readonly flag = new Int32Array(new SharedArrayBuffer(8))
  private readonly syncPort: MessagePort
  private readonly waiting = new Map<number, (answer: ServerAnswer) => void>()
  private seq = 0
  private closed = false

  constructor(stockade: string, private readonly env: string, private readonly orphan: (line: string) => void) {
    const { port1, port2 } = new MessageChannel()
    this.syncPort = port1
    this.worker = new Worker(SERVER_WORKER, {
      eval: true,
      workerData: { flag: this.flag, syncPort: port2, stockade, env },
      transferList: [port2],
    })
    this.worker.unref()
    this.worker.on('message', ({ id, ...answer }: { id: number } & ServerAnswer) => {
      const deliver = this.waiting.get(id)
      this.waiting.delete(id)
      if (deliver !== undefined) deliver(answer)
      else if ('line' in answer) this.orphan(answer.line)
    })
    this.worker.on('error', () => this.close('kill'))
  }

  usable(env: string): boolean {
    return !this.closed && env === this.env
  }

  /** Asks and waits, blocking this thread for at most `timeoutMs`. */
  ask(cwd: string | undefined, args: string[], timeoutMs: number): ServerAnswer {
    const id = ++this.seq
    this.worker.postMessage({ id, cwd: cwd ?? process.cwd(), args: args.slice(1), sync: true })
    const deadline = Date.now() + timeoutMs
    for (let seen = Atomics.load(this.flag, 0); seen !== id; seen = Atomics.load(this.flag, 0)) {
      const left = deadline - Date.now()
      if (left <= 0 || this.closed) return this.timedOut(timeoutMs)
      Atomics.wait(this.flag, 0, seen, left)
    }
    for (let got = receiveMessageOnPort(this.syncPort); got !== undefined; got = receiveMessageOnPort(this.syncPort)) {
      const { id: answered, ...answer } = got.message as { id: number } & ServerAnswer
      if (answered === id) return answer
    }
    return { lost: 'the answer went missing', restart: false }
  }

  /** Asks without blocking; resolves by the deadline, or at once when `signal` aborts. */
  askAsync(cwd: string | undefined, args: string[], timeoutMs: number, signal?: AbortSignal): Promise<ServerAnswer> {
    const id = ++this.seq
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id)
        resolve(this.timedOut(timeoutMs))
      }, timeoutMs)
      const aborted = () => {
        // The answer still comes; its directory goes then (`orphan`).
        this.waiting.delete(id)
        clearTimeout(timer)
        resolve({ lost: 'aborted', restart: false })
      }
      signal?.addEventListener('abort', aborted, { once: true })
      this.waiting.set(id, (answer) => {
        clearTimeout(timer)
        signal?.removeEventListener('abort', aborted)
        resolve(answer)
      })
      this.worker.postMessage({ id, cwd: cwd ?? process.cwd(), args: args.slice(1), sync: false })
    })
  }

  /** A server past its deadline is killed: whatever it was doing, it answers nothing more. */
  private timedOut(timeoutMs: number): ServerAnswer {
    this.close('kill')
    return { lost: `no answer within ${timeoutMs} ms`, restart: false }
  }

  /**
   * `end`: the worker goes, and with it the server's stdin, at whose end the server
   * removes what it made ahead and exits; `kill`: the server is killed first.
   */
  close(how: 'end' | 'kill' = 'end'): void {
    if (this.closed) return
    this.closed = true
    const pid = Atomics.load(this.flag, 1)
    if (how === 'kill' && pid > 0) {
      try {
        process.kill(-pid, 'SIGKILL')
      } catch {
        // Gone already.
      }
    }
    void this.worker.terminate()
    for (const deliver of this.waiting.values()) deliver({ lost: 'the provider closed its stockade serve', restart: false })
    this.waiting.clear()
  }
}

/** The state of a `DirectServer`'s watchdog cell, as `WATCHDOG` reads it. */
const IDLE = 0
const CLOSING = -1
const TIMED_OUT = -2
/**
 * How often a `DirectServer`'s watchdog looks whether an ask began. An ask does not wake
 * it (two wake-ups of another thread an ask, on the machine the server works on, held
 * the event loop 0.17 ms longer: 0.85 against 0.67 ms a `confine`), so the deadline is
 * kept to within this much: a server is killed between its deadline and this long after.
 */
const WATCH_EVERY_MS = 250
/**
 * The watchdog of a `DirectServer`, a thread of its own that does nothing but wait. Its
 * cell: [0] the ask in progress (0: none; -1: close; -2: the watchdog took the ask as
 * timed out), [1] the server's process group, [2] the ask's deadline in ms. It looks
 * every WATCH_EVERY_MS while no ask is known to it; an ask it finds is timed from then.
 * Past the deadline it claims the ask (so an answer that came just in time is not
 * mistaken for a late one) and kills the group; the trial of the namespaces that
 * `confine` may fork holds the server's stdout too, and dies with it.
 */
const WATCHDOG = `
const { workerData } = require('node:worker_threads')
const { performance } = require('node:perf_hooks')
const cell = workerData.cell
let seen = 0
let since = 0
for (;;) {
  const ask = Atomics.load(cell, 0)
  if (ask === ${CLOSING}) break
  if (ask <= 0) { Atomics.wait(cell, 0, ask, ${WATCH_EVERY_MS}); continue }
  if (ask !== seen) { seen = ask; since = performance.now() }
  const left = since + Atomics.load(cell, 2) - performance.now()
  if (left > 0) { Atomics.wait(cell, 0, ask, Math.min(left, ${WATCH_EVERY_MS})); continue }
  if (Atomics.compareExchange(cell, 0, ask, ${TIMED_OUT}) !== ask) continue
  try { process.kill(-Atomics.load(cell, 1), 'SIGKILL') } catch {}
}
`

/** How long a `DirectServer` told to end may take before it is killed. */
const END_GRACE_MS = 2000

/**
 * A kept `stockade serve` the main thread talks to itself, over two FIFOs made in a
 * fresh directory in stockade's control base, which no confined command can read, so
 * none can open them while they have names (removed again once open: only the
 * descriptors remain). Its
 * stderr goes to an unlinked file, read for the server's last words when it ends.
 */
export class DirectServer {
  private readonly cell = new Int32Array(new SharedArrayBuffer(12))
  private readonly watchdog: Worker
  private readonly child: ChildProcess
  private readonly requests: number
  private readonly answers: number
  private readonly stderr: number
  private seq = 0
  private closed = false

  /**
   * The server, its FIFOs made in `base` (a directory no confined command can read:
   * stockade's control base), or `undefined` where FIFOs cannot be made there
   * (`WorkerServer` then).
   */
  static start(stockade: string, env: string, base: string): DirectServer | undefined {
    const dir = mkdtempSync(join(base, 'stockade-serve-'))
    try {
      const made = spawnSync('mkfifo', ['-m', '0600', '--', join(dir, 'requests'), join(dir, 'answers')], { stdio: 'ignore' })
      if (made.status !== 0) return undefined
      const channel = openChannel(dir)
      try {
        return new DirectServer(stockade, env, channel)
      } catch {
        for (const fd of Object.values(channel)) closeSync(fd)
        return undefined
      }
    } catch {
      return undefined
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }

  private constructor(private readonly stockade: string, private readonly env: string, channel: Channel) {
    this.requests = channel.requests
    this.answers = channel.answers
    this.stderr = channel.stderr
    // Its own process group, so that the watchdog's kill reaches whatever it forked.
    this.child = spawn(stockade, ['serve'], {
      stdio: [channel.serverIn, channel.serverOut, channel.stderr],
      env: JSON.parse(env),
      cwd: '/',
      detached: true,
    })
    closeSync(channel.serverIn)
    closeSync(channel.serverOut)
    this.child.unref()
    this.child.on('error', () => this.close())
    this.child.on('exit', () => this.close())
    Atomics.store(this.cell, 1, this.child.pid ?? 0)
    this.watchdog = new Worker(WATCHDOG, { eval: true, workerData: { cell: this.cell } })
    this.watchdog.unref()
  }

  usable(env: string): boolean {
    return !this.closed && env === this.env
  }

  /** Asks and waits, blocking this thread for at most `timeoutMs`. */
  ask(cwd: string | undefined, args: string[], timeoutMs: number): ServerAnswer {
    if (this.child.pid === undefined) return this.ended(`cannot start ${this.stockade} serve`)
    if (this.closed) return this.ended()
    const id = ++this.seq
    const request = Buffer.from(JSON.stringify({ cwd: cwd ?? process.cwd(), args: args.slice(1) }) + '\n')
    // The watchdog finds the ask when it next looks (it is not woken: see WATCH_EVERY_MS).
    Atomics.store(this.cell, 2, Math.max(1, timeoutMs))
    Atomics.store(this.cell, 0, id)
    let line: string | undefined
    let late = false
    try {
      line = this.send(request, Date.now() + timeoutMs) ? this.receive() : undefined
    } finally {
      // The ask is over: unless the watchdog took it first, it has nothing left to do.
      if (Atomics.compareExchange(this.cell, 0, id, IDLE) === TIMED_OUT) {
        Atomics.store(this.cell, 0, IDLE)
        this.close('kill')
        late = true
      }
    }
    // An answer read in full before the kill is still the server's answer.
    if (line !== undefined) return { line }
    return late ? { lost: `no answer within ${timeoutMs} ms`, restart: false } : this.ended()
  }

  /**
   * Writes the whole request; false once the server can take no more (it ended, or the
   * deadline passed while its FIFO was full: the watchdog then ends it).
   */
  private send(request: Buffer, deadline: number): boolean {
    for (let sent = 0; sent < request.length;) {
      try {
        sent += writeSync(this.requests, request, sent)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN' || Date.now() > deadline) return false
        // A request longer than the FIFO holds: the server reads it as it comes.
        Atomics.wait(this.cell, 0, Atomics.load(this.cell, 0), 1)
      }
    }
    return true
  }

  /** The answer line, or `undefined` when the server's stdout closed first. */
  private receive(): string | undefined {
    const chunks: Buffer[] = []
    const chunk = Buffer.allocUnsafe(64 * 1024)
    for (;;) {
      const got = readSync(this.answers, chunk, 0, chunk.length, null)
      if (got === 0) return undefined
      const end = chunk.indexOf(10)
      if (end >= 0 && end < got) {
        // One answer a request, so nothing follows its newline; anything that did could
        // not be told from the next answer.
        if (end !== got - 1) this.close('kill')
        chunks.push(Buffer.from(chunk.subarray(0, end)))
        return Buffer.concat(chunks).toString('utf8')
      }
      chunks.push(Buffer.from(chunk.subarray(0, got)))
    }
  }

  /**
   * Why the server answers no more (`why`, else its own last `stockade:` line, when it
   * said one); asking a new one is safe.
   */
  private ended(why?: string): ServerAnswer {
    let said: string | undefined
    if (!this.closed) {
      try {
        const size = fstatSync(this.stderr).size
        const tail = Buffer.alloc(Math.min(size, 4096))
        readSync(this.stderr, tail, 0, tail.length, size - tail.length)
        said = tail.toString('utf8').split('\n').find((l) => l.startsWith('stockade: '))
      } catch {
        // Nothing to read: no words to give.
      }
    }
    this.close('kill')
    return { lost: why ?? said ?? 'stockade serve ended', restart: true }
  }

  /**
   * `end`: its requests' FIFO closes, at whose end the server removes what it made
   * ahead and exits (one still there after `END_GRACE_MS` is killed); `kill`: its
   * process group is killed now.
   */
  close(how: 'end' | 'kill' = 'end'): void {
    if (this.closed) return
    this.closed = true
    Atomics.store(this.cell, 0, CLOSING)
    Atomics.notify(this.cell, 0)
    for (const fd of [this.requests, this.answers, this.stderr]) closeSync(fd)
    if (how === 'kill') this.kill()
    else setTimeout(() => this.kill(), END_GRACE_MS).unref()
  }

  /**
   * Kills the server's process group, unless the server was reaped already (its pid may
   * be another's then). Node reaps it on this thread, setting its exit code as it does,
   * so while an ask blocks this thread the pid is still the server's.
   */
  private kill(): void {
    const pid = this.child.pid
    if (pid === undefined || this.child.exitCode !== null || this.child.signalCode !== null) return
    try {
      process.kill(-pid, 'SIGKILL')
    } catch {
      // Gone already.
    }
  }
}

/** The descriptors of a `DirectServer`: the server's ends and ours. */
interface Channel {
  serverIn: number
  serverOut: number
  requests: number
  answers: number
  stderr: number
}

/**
 * Opens both FIFOs in `dir` so that no open waits: a read end opens at once while a
 * writer exists, which a momentary read-write descriptor provides. Ours are the
 * requests' write end (non-blocking, so a full FIFO cannot outlast the deadline) and the
 * answers' read end (blocking: the main thread sleeps in `read` until the answer).
 */
function openChannel(dir: string): Channel {
  const { O_RDONLY, O_WRONLY, O_RDWR, O_NONBLOCK, O_NOFOLLOW, O_CREAT, O_EXCL } = constants
  // Everything opened so far, closed again should a later step fail.
  const opened: number[] = []
  const fifo = (name: string, flags: number): number => {
    const fd = openSync(join(dir, name), flags | O_NOFOLLOW)
    opened.push(fd)
    if (!fstatSync(fd).isFIFO()) throw new Error(`${join(dir, name)} is not the FIFO made for it`)
    return fd
  }
  try {
    const heldRequests = fifo('requests', O_RDWR)
    const serverIn = fifo('requests', O_RDONLY)
    const requests = fifo('requests', O_WRONLY | O_NONBLOCK)
    const heldAnswers = fifo('answers', O_RDWR)
    const answers = fifo('answers', O_RDONLY)
    const serverOut = fifo('answers', O_WRONLY)
    for (const held of [heldRequests, heldAnswers]) {
      closeSync(held)
      opened.splice(opened.indexOf(held), 1)
    }
    const stderr = openSync(join(dir, 'stderr'), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600)
    return { serverIn, serverOut, requests, answers, stderr }
  } catch (error) {
    for (const fd of opened) closeSync(fd)
    throw error
  }
}
