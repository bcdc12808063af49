//! A small pool of persistent worker threads for the per-op parallelism of the decode path.
//!
//! One forward pass of a small model issues a few hundred short parallel operations (a matrix
//! product of one to a few dozen rows takes 5–200 µs). Handing each to rayon costs several
//! microseconds to tens of microseconds (sleeping workers are woken through the OS), which at
//! these sizes is a large share of the work. Here every worker spins on an epoch counter while
//! work keeps coming, so one operation is started and joined in well under a microsecond; a
//! worker that saw nothing for `SPIN` parks on a condition variable and costs nothing idle.
//! A run crosses between cores twice: the caller publishes the job and its epoch on one cache
//! line, and each worker marks the epoch finished on a line of its own (nothing is reset per
//! run). On a 2-core KVM guest (Zen 4, session 43; `cargo bench -p draftsmith-kernels --bench
//! pool`) an empty run costs 50–100 ns when the two vCPUs sit close and 543–655 ns when the host
//! puts them far apart (a job mutex and a shared done counter before: 70–80 / 634–821 ns, and
//! 1030–1192 ns instead of 595–695 when the job touches a line per thread).
//!
//! [`Pool::run`] calls `f(thread, threads)` once on every thread (the caller is thread 0) and
//! returns when all have finished. Work is split by the caller's own rule (usually contiguous
//! ranges of output rows), so how many threads run never changes any result. Waits spin while
//! short and yield the core once they have lasted `YIELD_AFTER`, so a machine shared with other
//! work slows the pool down by its share, not by scheduler time slices. When the pool is
//! busy (another thread is inside `run`, or `run` is called from inside a job), the call runs
//! `f(0, 1)` inline instead: same results, no deadlock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long an idle worker spins before it parks.
const SPIN: Duration = Duration::from_micros(200);

/// The job of the current epoch: a type-erased `*const (dyn Fn(usize, usize) + Sync)`, kept as
/// its two words so that it can sit in atomics beside the epoch.
type JobWords = [usize; 2];

const _: () = assert!(std::mem::size_of::<*const (dyn Fn(usize, usize) + Sync)>() == std::mem::size_of::<JobWords>());

/// A value alone on its cache line (two lines: adjacent-line prefetchers pair them).
#[repr(align(128))]
struct Padded<T>(T);

/// What the caller of [`Pool::run`] publishes: the job's words, then the epoch that announces
/// them, on one cache line, so a waiting worker picks up a run with one line transfer.
struct Published {
    epoch: AtomicUsize,
    job: [AtomicUsize; 2],
}

struct Shared {
    /// Written by the caller once per run; read by the spinning workers.
    published: Padded<Published>,
    /// Per worker (index `thread - 1`), the last epoch whose job it finished: written by that
    /// worker only, read by the caller, never reset (no line bounces back and forth per run).
    finished: Box<[Padded<AtomicUsize>]>,
    /// Workers parked on `wake` (read by the caller once per run; written only when parking).
    parked: Padded<AtomicUsize>,
    /// Parked workers wait here for a new epoch.
    wake: Condvar,
    park: Mutex<()>,
}

/// Persistent worker threads; see the module docs.
pub struct Pool {
    threads: usize,
    shared: &'static Shared,
    /// Held by the thread inside [`Pool::run`].
    busy: Mutex<()>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").field("threads", &self.threads).finish()
    }
}

/// The threads the process computes on: `DRAFTSMITH_THREADS` if set to a positive count, else
/// one per available core (a value [`threads_setting`] refuses counts as unset here; the CLI
/// refuses it before anything runs).
pub fn configured_threads() -> usize {
    threads_setting().ok().flatten().unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// `DRAFTSMITH_THREADS` as set: `None` when unset, the count when it is a positive integer, and
/// what is wrong with it otherwise.
pub fn threads_setting() -> Result<Option<usize>, String> {
    let Some(raw) = std::env::var_os("DRAFTSMITH_THREADS") else { return Ok(None) };
    match raw.to_str().and_then(|v| v.trim().parse::<usize>().ok()) {
        Some(t) if t > 0 => Ok(Some(t)),
        _ => Err(format!(
            "DRAFTSMITH_THREADS={}: expected a positive number of threads (unset it for one per core)",
            raw.to_string_lossy()
        )),
    }
}

impl Pool {
    /// The process-wide pool: [`configured_threads`] threads.
    pub fn global() -> &'static Pool {
        static POOL: OnceLock<Pool> = OnceLock::new();
        POOL.get_or_init(|| Pool::new(configured_threads()))
    }

    /// A pool of `threads` threads in all (the caller of `run` counts as one). Its workers live
    /// as long as the process.
    pub fn new(threads: usize) -> Self {
        let threads = threads.max(1);
        let shared: &'static Shared = Box::leak(Box::new(Shared {
            published: Padded(Published {
                epoch: AtomicUsize::new(0),
                job: [AtomicUsize::new(0), AtomicUsize::new(0)],
            }),
            finished: (1..threads).map(|_| Padded(AtomicUsize::new(0))).collect(),
            parked: Padded(AtomicUsize::new(0)),
            wake: Condvar::new(),
            park: Mutex::new(()),
        }));
        for t in 1..threads {
            std::thread::Builder::new()
                .name(format!("draftsmith-worker-{t}"))
                .spawn(move || worker(shared, t, threads))
                .expect("spawn a kernel worker thread");
        }
        Self { threads, shared, busy: Mutex::new(()) }
    }

    /// Number of threads `run` uses when the pool is free.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Calls `f(thread, threads)` on every thread of the pool and waits for all of them; runs
    /// `f(0, 1)` on the calling thread when the pool has one thread or is busy.
    pub fn run(&self, f: &(dyn Fn(usize, usize) + Sync)) {
        if self.threads == 1 {
            return f(0, 1);
        }
        let Ok(_guard) = self.busy.try_lock() else {
            return f(0, 1);
        };
        let s = self.shared;
        // SAFETY (lifetime erasure): workers call the job only before they mark the epoch
        // finished, and this function does not return before every worker has.
        let words: JobWords =
            unsafe { std::mem::transmute::<*const (dyn Fn(usize, usize) + Sync + '_), JobWords>(f as *const _) };
        let p = &s.published.0;
        p.job[0].store(words[0], Ordering::Relaxed);
        p.job[1].store(words[1], Ordering::Relaxed);
        // Publishes the job words (Release), and orders this bump before the `parked` load below
        // (SeqCst on both sides: a worker that parks after this load sees the new epoch).
        let epoch = p.epoch.fetch_add(1, Ordering::SeqCst) + 1;
        if s.parked.0.load(Ordering::SeqCst) > 0 {
            let _lock = s.park.lock().expect("pool park lock");
            s.wake.notify_all();
        }
        // A panic in the caller's share must not leave workers reading a dead job.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(0, self.threads)));
        for done in s.finished.iter() {
            let mut wait = Backoff::new();
            while done.0.load(Ordering::Acquire) != epoch {
                wait.pause();
            }
        }
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
    }
}

impl Pool {
    /// Calls `f(i, chunk_i)` for every `chunk`-long piece of `data` (the last may be shorter),
    /// the pieces split into contiguous runs over the pool's threads; inline when `parallel` is
    /// false. Each piece is visited exactly once, so the split never changes a result.
    pub fn for_each_chunk<T: Send>(
        &self,
        data: &mut [T],
        chunk: usize,
        parallel: bool,
        f: impl Fn(usize, &mut [T]) + Sync,
    ) {
        assert!(chunk > 0, "chunk size must be positive");
        let (len, pieces) = (data.len(), data.len().div_ceil(chunk));
        if !parallel || pieces < 2 {
            data.chunks_mut(chunk).enumerate().for_each(|(i, c)| f(i, c));
            return;
        }
        let shared = DisjointSlice::new(data);
        self.run(&|t, threads| {
            for i in split(pieces, t, threads) {
                let start = i * chunk;
                // SAFETY: pieces are disjoint and each is handed to one thread only.
                f(i, unsafe { shared.part(start, chunk.min(len - start)) });
            }
        });
    }
}

/// Runs `f` with this thread's scratch from `key`, or a fresh default one when it is already in
/// use (a call nested inside another on the same thread, e.g. an operation run inline by a busy
/// pool from inside a job). The kernels' activation buffers and the model's per-pass and
/// attention buffers all live this way.
pub fn with_thread_scratch<T: Default + 'static, R>(
    key: &'static std::thread::LocalKey<std::cell::RefCell<T>>,
    f: impl FnOnce(&mut T) -> R,
) -> R {
    key.with(|cell| match cell.try_borrow_mut() {
        Ok(mut s) => f(&mut s),
        Err(_) => f(&mut T::default()),
    })
}

/// One exclusively borrowed slice shared by threads that each write their own, disjoint parts
/// of it (row ranges of a product, the rows of one attention unit, one tile's activations).
pub struct DisjointSlice<'a, T> {
    ptr: *mut T,
    len: usize,
    _borrow: std::marker::PhantomData<&'a mut [T]>,
}

// SAFETY: `part`'s contract keeps the threads' parts disjoint; `T: Send` lets them be written
// from other threads.
unsafe impl<T: Send> Sync for DisjointSlice<'_, T> {}

impl<'a, T> DisjointSlice<'a, T> {
    pub fn new(data: &'a mut [T]) -> Self {
        Self { ptr: data.as_mut_ptr(), len: data.len(), _borrow: std::marker::PhantomData }
    }

    /// `data[at .. at + len]` (bounds checked).
    ///
    /// # Safety
    /// No two parts alive at the same time may overlap.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn part(&self, at: usize, len: usize) -> &mut [T] {
        assert!(
            at.checked_add(len).is_some_and(|end| end <= self.len),
            "part {at}+{len} beyond a slice of {}",
            self.len
        );
        // SAFETY: in bounds; the caller keeps live parts disjoint, and the slice is borrowed
        // exclusively for `'a`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(at), len) }
    }

    /// `data[at .. at + len]` to read (bounds checked).
    ///
    /// # Safety
    /// No part overlapping it may be alive, nor be written, while the result is.
    pub unsafe fn get(&self, at: usize, len: usize) -> &[T] {
        assert!(
            at.checked_add(len).is_some_and(|end| end <= self.len),
            "range {at}+{len} beyond a slice of {}",
            self.len
        );
        // SAFETY: in bounds; the caller keeps writers away while it reads.
        unsafe { std::slice::from_raw_parts(self.ptr.add(at), len) }
    }
}

/// A meeting point inside one [`Pool::run`]: [`Barrier::wait`] returns once all of the run's
/// `threads` threads have called it, and everything each wrote before calling it is then visible
/// to all (for a job in two phases, e.g. quantize shares of the input, then multiply). One use
/// per run; with `threads = 1` (a nested or busy run going inline) it returns at once.
#[derive(Default)]
pub(crate) struct Barrier(AtomicUsize);

impl Barrier {
    pub(crate) fn wait(&self, threads: usize) {
        self.0.fetch_add(1, Ordering::AcqRel);
        let mut wait = Backoff::new();
        while self.0.load(Ordering::Acquire) < threads {
            wait.pause();
        }
    }
}

fn worker(s: &'static Shared, thread: usize, threads: usize) {
    let p = &s.published.0;
    let mut seen = 0usize;
    loop {
        let start = Instant::now();
        let mut spins = 0u32;
        let mut wait = Backoff::new();
        let epoch = loop {
            let e = p.epoch.load(Ordering::Acquire);
            if e != seen {
                break e;
            }
            spins += 1;
            if spins.is_multiple_of(1024) && start.elapsed() > SPIN {
                let mut lock = s.park.lock().expect("pool park lock");
                s.parked.0.fetch_add(1, Ordering::SeqCst);
                while p.epoch.load(Ordering::SeqCst) == seen {
                    lock = s.wake.wait(lock).expect("pool park wait");
                }
                s.parked.0.fetch_sub(1, Ordering::SeqCst);
            } else {
                wait.pause();
            }
        };
        seen = epoch;
        let words: JobWords = [p.job[0].load(Ordering::Relaxed), p.job[1].load(Ordering::Relaxed)];
        // SAFETY: the words are those `run` stored before announcing this epoch (read after the
        // Acquire load that saw it); `run` keeps the job alive until this worker marks the epoch
        // finished, and the caller does not publish another job before then.
        let f = unsafe { &*std::mem::transmute::<JobWords, *const (dyn Fn(usize, usize) + Sync)>(words) };
        // A panicking job would leave `run` waiting forever; abort loudly instead.
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(thread, threads))).is_err() {
            eprintln!("draftsmith: a kernel worker thread panicked");
            std::process::abort();
        }
        s.finished[thread - 1].0.store(epoch, Ordering::Release);
    }
}

/// A wait that spins while it is short and yields the core once it is not: on a machine whose
/// cores are shared with other work, the thread being waited for may be descheduled, and a
/// waiter that only spins keeps it off the core for the rest of a scheduler time slice
/// (milliseconds, against operations of microseconds: a SmolLM2 step went from 7 ms to ~80 ms
/// with one compiler process beside it). Yielding costs a system call, and only once a wait has
/// already lasted [`YIELD_AFTER`].
struct Backoff {
    start: Option<Instant>,
    spins: u32,
}

/// How long a wait spins before it starts yielding the core between checks.
const YIELD_AFTER: Duration = Duration::from_micros(20);

impl Backoff {
    fn new() -> Self {
        Self { start: None, spins: 0 }
    }

    /// One round of waiting: a spin-loop hint, or a yield once the wait is long.
    fn pause(&mut self) {
        self.spins += 1;
        if self.spins < 64 {
            std::hint::spin_loop();
            return;
        }
        let start = *self.start.get_or_insert_with(Instant::now);
        if start.elapsed() > YIELD_AFTER {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// The `part`-th of `parts` near-equal contiguous pieces of `0..len`.
pub fn split(len: usize, part: usize, parts: usize) -> std::ops::Range<usize> {
    let (base, extra) = (len / parts, len % parts);
    let start = part * base + part.min(extra);
    start..start + base + usize::from(part < extra)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_thread_runs_once_and_results_join() {
        let pool = Pool::new(3);
        for _ in 0..200 {
            let hits: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
            pool.run(&|t, n| {
                assert_eq!(n, 3);
                hits[t].fetch_add(1, Ordering::Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        }
    }

    #[test]
    fn nested_run_falls_back_inline() {
        let pool = Pool::new(2);
        let total = AtomicUsize::new(0);
        pool.run(&|_, _| {
            pool.run(&|t, n| {
                assert_eq!((t, n), (0, 1));
                total.fetch_add(1, Ordering::Relaxed);
            });
        });
        assert_eq!(total.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn parked_workers_wake() {
        let pool = Pool::new(2);
        std::thread::sleep(Duration::from_millis(5));
        let total = AtomicUsize::new(0);
        pool.run(&|_, _| {
            total.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(total.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_barrier_lets_no_thread_past_before_all_have_written() {
        let pool = Pool::new(3);
        for _ in 0..200 {
            let written: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
            let barrier = Barrier::default();
            pool.run(&|t, n| {
                written[t].store(1, Ordering::Relaxed);
                barrier.wait(n);
                assert!(written.iter().all(|w| w.load(Ordering::Relaxed) == 1), "thread {t} passed early");
            });
        }
    }

    #[test]
    fn chunks_are_visited_once() {
        let pool = Pool::new(2);
        let mut data = vec![0usize; 103];
        pool.for_each_chunk(&mut data, 10, true, |i, c| c.iter_mut().for_each(|v| *v += i + 1));
        assert!(data.iter().enumerate().all(|(j, &v)| v == j / 10 + 1));
    }

    #[test]
    fn split_covers_the_range() {
        for len in 0..20 {
            for parts in 1..5 {
                let pieces: Vec<_> = (0..parts).map(|p| split(len, p, parts)).collect();
                assert_eq!(pieces[0].start, 0);
                assert_eq!(pieces[parts - 1].end, len);
                assert!(pieces.windows(2).all(|w| w[0].end == w[1].start));
            }
        }
    }
}
