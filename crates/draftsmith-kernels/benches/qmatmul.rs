//! Quantized matmul benchmark (no harness): median wall time of repeated runs.
//!
//! `cargo bench -p draftsmith-kernels` prints, per weight shape `[rows=out, cols=in]`, format and
//! activation rows `n`, for both activation modes side by side (f32 = weight-only quantization,
//! the default; int8 = llama.cpp style): median and minimum milliseconds, GFLOP/s
//! (`2·rows·cols·n`) and GB/s of weight bytes; Qwen-1.5B's `ffn_down` shape as Q6_K and as Q8_0,
//! its `ffn_gate` shape as Q4_K and as Q4_1 and as Q5_K and as Q8_0, Qwen-0.5B's as Q5_0 and as
//! Q8_0, SmolLM2's as Q4_0 and as Q4_1.
//! Then the whole SmolLM2-135M step in both modes.
//! Pass `-- --paths` to also time every supported kernel path (`--path-list amx,avx512vnni`:
//! those), `--int8` for the int8 mode alone, `--rows 1,2,4,8,64` for the model step's rows,
//! `--hot` for its layers' arithmetic with the weights in cache beside them streamed.

use std::time::{Duration, Instant};

use draftsmith_kernels::{Activations, KernelPath, QFormat, QMatrix};

/// SplitMix64 for reproducible random weights and activations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let z = (self.0 ^ (self.0 >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn f32(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
}

/// Random GGUF blocks with sane f16 scales.
fn random_matrix(format: QFormat, rows: usize, cols: usize, rng: &mut Rng) -> QMatrix {
    if format == QFormat::Q6K {
        // Super-blocks of 256: random low and high bits, scales of either sign, small `d`.
        let mut bytes = Vec::with_capacity(rows * cols / 256 * format.block_bytes());
        for _ in 0..rows * cols / 256 {
            bytes.extend((0..192).map(|_| rng.next() as u8));
            bytes
                .extend((0..16).map(|_| (rng.next() % 64) as u8 ^ if rng.next().is_multiple_of(2) { 0 } else { 0xC0 }));
            bytes.extend_from_slice(&half::f16::from_f32(0.0005).to_bits().to_le_bytes());
        }
        return QMatrix::from_ggml_blocks(format, &bytes, rows, cols).expect("valid shape");
    }
    if matches!(format, QFormat::Q4K | QFormat::Q5K) {
        // Super-blocks of 256: small `d` and `dmin`, random 6-bit scales and minima, (fifth
        // bits,) nibbles.
        let mut bytes = Vec::with_capacity(rows * cols / 256 * format.block_bytes());
        for _ in 0..rows * cols / 256 {
            for v in [0.0008f32, 0.0003] {
                bytes.extend_from_slice(&half::f16::from_f32(v).to_bits().to_le_bytes());
            }
            bytes.extend((0..format.block_bytes() - 4).map(|_| rng.next() as u8));
        }
        return QMatrix::from_ggml_blocks(format, &bytes, rows, cols).expect("valid shape");
    }
    let blocks = rows * cols / 32;
    let mut bytes = Vec::with_capacity(blocks * format.block_bytes());
    for _ in 0..blocks {
        bytes.extend_from_slice(&half::f16::from_f32(0.01 + 0.005 * rng.f32()).to_bits().to_le_bytes());
        if format == QFormat::Q4_1 {
            bytes.extend_from_slice(&half::f16::from_f32(-0.08).to_bits().to_le_bytes());
        }
        let quant_bytes = match format {
            QFormat::Q8_0 => 32,
            QFormat::Q5_0 => 20,
            _ => 16,
        };
        bytes.extend((0..quant_bytes).map(|_| rng.next() as u8));
    }
    QMatrix::from_ggml_blocks(format, &bytes, rows, cols).expect("valid shape")
}

/// `(median, min)` milliseconds of `f`, repeated for about `budget` (at least 7 runs, after
/// warm-up). The minimum is less sensitive to other load on the machine.
fn time_ms(budget: Duration, mut f: impl FnMut()) -> (f64, f64) {
    f();
    let start = Instant::now();
    let mut times = Vec::new();
    while times.len() < 7 || (start.elapsed() < budget && times.len() < 2000) {
        let t = Instant::now();
        f();
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], times[0])
}

/// Median and minimum milliseconds of one `(matrix, n, path, mode)` case.
fn time_case(m: &QMatrix, n: usize, path: KernelPath, mode: Activations, x: &[f32]) -> (f64, f64) {
    let mut y = vec![0.0; n * m.rows()];
    time_ms(Duration::from_millis(300), || m.matmul_mode_with(mode, path, x, n, &mut y))
}

/// Times one `(matrix, n, path)` case in both modes and prints a table row.
fn bench_case(m: &QMatrix, n: usize, path: KernelPath, modes: &[Activations], rng: &mut Rng) {
    let x: Vec<f32> = (0..n * m.cols()).map(|_| rng.f32()).collect();
    let shape = format!("{}x{}", m.rows(), m.cols());
    let fmt = format!("{:?}", m.format());
    print!("{shape:>10} {fmt:>5} {n:>3} {:>11}", path.name());
    for mode in [Activations::F32, Activations::Int8] {
        if !modes.contains(&mode) || !m.format().fast_in(mode) {
            // The scalar reference kernel only (seconds per product): not a figure to compare.
            print!(" | {:>8} {:>8} {:>6} {:>6}", "–", "–", "–", "–");
            continue;
        }
        let (ms, min) = time_case(m, n, path, mode, &x);
        let gflops = 2.0 * (m.rows() * m.cols() * n) as f64 / (ms * 1e6);
        let gbs = m.n_bytes() as f64 / (ms * 1e6);
        print!(" | {ms:>8.4} {min:>8.4} {gflops:>6.1} {gbs:>6.1}");
    }
    println!();
}

/// Naive single-threaded f32 matvec (`rows × cols` weights), for comparison.
fn bench_f32_naive(rows: usize, cols: usize, rng: &mut Rng) {
    let w: Vec<f32> = (0..rows * cols).map(|_| rng.f32()).collect();
    let x: Vec<f32> = (0..cols).map(|_| rng.f32()).collect();
    let mut y = vec![0.0f32; rows];
    let (ms, min) = time_ms(Duration::from_millis(400), || {
        for (yr, wr) in y.iter_mut().zip(w.chunks_exact(cols)) {
            *yr = wr.iter().zip(&x).map(|(a, b)| a * b).sum();
        }
        std::hint::black_box(&mut y);
    });
    let gflops = 2.0 * (rows * cols) as f64 / (ms * 1e6);
    let gbs = (rows * cols * 4) as f64 / (ms * 1e6);
    let shape = format!("{rows}x{cols}");
    let path = "naive-1thr";
    println!("{shape:>10} {:>5} {:>3} {path:>11} {ms:>9.4} {min:>9.4} {gflops:>8.1} {gbs:>7.1}", "f32", 1);
}

/// The matmuls `all`, in order, over `n` tokens for each of the options' row counts, printed
/// under `label`: `main`'s model step is one SmolLM2-135M forward pass (30 layers of Q4_1
/// q/k/v/o/gate/up/down, then the Q8_0 LM head) on distinct matrices (≈ 94 MB, more than the
/// caches of most machines), so weights stream from memory as in real decoding. Timed from the
/// main thread and from inside the rayon pool (where `matmul` avoids the cross-thread hand-off
/// per call).
fn bench_model_step(label: &str, all: &[&QMatrix], opts: &Options, rng: &mut Rng) {
    let macs: usize = all.iter().map(|m| m.rows() * m.cols()).sum();
    let bytes: usize = all.iter().map(|m| m.n_bytes()).sum();
    let out = all.iter().map(|m| m.rows()).max().unwrap_or(0);
    println!("{label}: {} matmuls, {:.1} MB of weights", all.len(), bytes as f64 / 1e6);
    for &n in &opts.rows {
        let x: Vec<f32> = (0..n * 1536).map(|_| rng.f32()).collect();
        let mut y = vec![0.0; n * out];
        for &path in &opts.paths {
            for &mode in &opts.modes {
                let mut step = || {
                    for m in all {
                        m.matmul_mode_with(mode, path, &x[..n * m.cols()], n, &mut y[..n * m.rows()]);
                    }
                };
                let (ms, min) = time_ms(Duration::from_millis(1500), &mut step);
                let (ms_pool, min_pool) = rayon::scope(|_| time_ms(Duration::from_millis(1500), &mut step));
                let gflops = 2.0 * (macs * n) as f64 / (ms * 1e6);
                let gbs = bytes as f64 / (ms * 1e6);
                let name = format!("{mode:?}");
                println!(
                    "{label} n={n:>2} {name:>4} {:>10}: median {ms:7.3} ms, min {min:7.3} ms \
                     ({gflops:5.1} GFLOP/s, {gbs:4.1} GB/s); inside pool: median {ms_pool:7.3} ms, \
                     min {min_pool:7.3} ms",
                    path.name()
                );
            }
        }
    }
}

/// Where the time of one streaming n=1 step goes, per matrix shape, in both modes: the sum over
/// many steps of each call's wall time (median-free, so load on the machine inflates it).
fn bench_breakdown(layers: &[Vec<QMatrix>], head: &QMatrix, rng: &mut Rng) {
    let all: Vec<&QMatrix> = layers.iter().flatten().chain([head]).collect();
    let x: Vec<f32> = (0..1536).map(|_| rng.f32()).collect();
    let mut y = vec![0.0; head.rows()];
    for mode in [Activations::F32, Activations::Int8] {
        let mut per_shape: Vec<((usize, usize), f64)> = Vec::new();
        let steps = 200;
        for _ in 0..steps {
            for m in &all {
                let t = Instant::now();
                m.matmul_mode(mode, &x[..m.cols()], 1, &mut y[..m.rows()]);
                let ms = t.elapsed().as_secs_f64() * 1e3;
                let key = (m.rows(), m.cols());
                match per_shape.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, total)) => *total += ms,
                    None => per_shape.push((key, ms)),
                }
            }
        }
        let parts: Vec<String> =
            per_shape.iter().map(|((r, c), ms)| format!("{r}x{c} {:.3}", ms / steps as f64)).collect();
        println!("n=1 step breakdown {mode:?} (ms per step): {}", parts.join(", "));
    }
}

/// SmolLM2-135M layer matrices `[rows=out, cols=in]`: q, k, v, o, gate, up, down.
const LAYER: [(usize, usize); 7] =
    [(576, 576), (192, 576), (192, 576), (576, 576), (1536, 576), (1536, 576), (576, 1536)];

/// The per-shape table: the three layer shapes in both formats, the Q8_0 LM head, then Qwen-sized
/// shapes in the formats their files keep and the ones they would be re-quantized to.
fn bench_table(opts: &Options, head: &QMatrix, rng: &mut Rng) {
    let paths = &opts.paths;
    let cols = ("median ms", "min ms", "GFLOP/s", "GB/s");
    let mode = format!("{:>8} {:>8} {:>6} {:>6}", cols.0, cols.1, cols.2, cols.3);
    println!("{:>33} | {:^31} | {:^31}", "", "f32 activations (default)", "int8 activations");
    println!("{:>10} {:>5} {:>3} {:>11} | {mode} | {mode}", "shape", "fmt", "n", "path");
    println!("(GFLOP/s and GB/s from the median; GB/s counts the packed weight bytes once)");
    for format in [QFormat::Q8_0, QFormat::Q4_1] {
        for (rows, cols) in [(576, 576), (1536, 576), (576, 1536)] {
            let m = random_matrix(format, rows, cols, rng);
            for n in [1, 8, 64] {
                for &p in paths {
                    bench_case(&m, n, p, &opts.modes, rng);
                }
            }
        }
    }
    for n in [1, 8, 64] {
        for &p in paths {
            bench_case(head, n, p, &opts.modes, rng);
        }
    }
    // Qwen2.5-1.5B's `ffn_down` shape, which a Q4_K_M file stores as Q6_K in half its layers:
    // kept as Q6_K (6.56 bits a value; int8 activations only: f32 ones have the scalar reference
    // kernel alone) against its Q8_0 re-quantization (8.5 bits).
    // Its `ffn_gate` shape as Q4_K (4.625 bits) against Q4_1 (5 bits, the f32 mode's form) and
    // as Q5_K (5.625 bits) against Q8_0, Qwen2.5-0.5B's `ffn_gate` shape as Q5_0 (5.5 bits)
    // against Q8_0 (8.5), SmolLM2's as Q4_0 (5 bits) against Q4_1: the other formats kept with
    // int8 activations, against what they would be rewritten to.
    let pairs = [
        ((1536, 8960), [QFormat::Q6K, QFormat::Q8_0]),
        ((8960, 1536), [QFormat::Q4K, QFormat::Q4_1]),
        ((8960, 1536), [QFormat::Q5K, QFormat::Q8_0]),
        ((4864, 896), [QFormat::Q5_0, QFormat::Q8_0]),
        ((1536, 576), [QFormat::Q4_0, QFormat::Q4_1]),
    ];
    for ((rows, cols), formats) in pairs {
        for format in formats {
            let m = random_matrix(format, rows, cols, rng);
            for n in [1, 8, 64] {
                for &p in paths {
                    bench_case(&m, n, p, &opts.modes, rng);
                }
            }
        }
    }
}

/// What to time (the flags of [`main`]).
struct Options {
    paths: Vec<KernelPath>,
    modes: Vec<Activations>,
    /// Activation rows of the model step.
    rows: Vec<usize>,
}

/// The value after `flag`, if given.
fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).map(String::as_str)
}

/// Flags: `--paths` times every supported kernel path (`--path-list amx,avx512vnni`: those);
/// `--int8` the int8 mode only; `--rows 1,2,8` the model step's activation rows (1, 8, 64);
/// `--model-only` skips the table; `--breakdown` adds a per-shape breakdown of the n=1 model
/// step; `--hot` adds the step's layers with their weights in cache (one layer's matrices 30
/// times) beside the same layers streamed (30 distinct layers, no LM head).
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    let detected = KernelPath::detect();
    let supported = KernelPath::ALL.into_iter().filter(|p| p.is_supported());
    let paths: Vec<KernelPath> = match flag_value(&args, "--path-list") {
        Some(list) => supported.filter(|p| list.split(',').any(|name| name == p.name())).collect(),
        None if has("--paths") => supported.collect(),
        None => vec![detected],
    };
    let rows = flag_value(&args, "--rows").map_or(vec![1, 8, 64], |list| {
        list.split(',').map(|v| v.parse().expect("--rows takes numbers like 1,8,64")).collect()
    });
    let modes = if has("--int8") { vec![Activations::Int8] } else { vec![Activations::F32, Activations::Int8] };
    let opts = Options { paths, modes, rows };
    println!("detected path: {}, rayon threads: {}", detected.name(), rayon::current_num_threads());
    let mut rng = Rng(42);
    let head = random_matrix(QFormat::Q8_0, 49152, 576, &mut rng);
    if !has("--model-only") {
        bench_table(&opts, &head, &mut rng);
    }
    let layers: Vec<Vec<QMatrix>> =
        (0..30).map(|_| LAYER.iter().map(|&(r, c)| random_matrix(QFormat::Q4_1, r, c, &mut rng)).collect()).collect();
    if has("--breakdown") {
        bench_breakdown(&layers, &head, &mut rng);
    }
    let all: Vec<&QMatrix> = layers.iter().flatten().chain([&head]).collect();
    bench_model_step("model step", &all, &opts, &mut rng);
    if has("--hot") {
        // The first layer's matrices 30 times over (~2.2 MB, within the cores' L2): the step's
        // arithmetic without its weight stream, to set against the streaming step above.
        let hot: Vec<&QMatrix> = (0..30).flat_map(|_| layers[0].iter()).collect();
        bench_model_step("hot layers", &hot, &opts, &mut rng);
        // The model step without its LM head (the last matrix).
        bench_model_step("cold layers", &all[..all.len() - 1], &opts, &mut rng);
    }
    drop((head, layers));
    bench_f32_naive(49152, 576, &mut rng);
}
