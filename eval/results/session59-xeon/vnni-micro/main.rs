use std::arch::x86_64::*;
use std::time::Instant;

const NB: usize = 18; // blocks of 16 rows x 32 values: 576 values
const UNIT: usize = 64;

macro_rules! bcast4 { ($p:expr) => { _mm512_set1_epi32($p.cast::<i32>().read_unaligned()) }; }

#[inline(always)]
unsafe fn unpack(wq: *const u8, u: usize) -> (__m512i, __m512i) {
    let low = _mm512_set1_epi8(0x0F);
    let v = _mm512_loadu_si512(wq.add(u * UNIT).cast());
    (_mm512_and_si512(v, low), _mm512_and_si512(_mm512_srli_epi16::<4>(v), low))
}

// MODE: 0 full, 1 no fold (int acc across blocks), 2 no unpack (weights in regs) + fold, 3 dp only, 4 full 2 chains,
// 5 fold without the affine fma, 6 full but x loads not broadcast from memory: pre-broadcast vectors
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn kern<const C: usize, const MODE: u8>(wq: &[u8], sc: &[u16], xq: &[i8], d: &[f32], s: &[f32], out: &mut [[f32; 16]; 16]) {
    let mut facc = [_mm512_setzero_ps(); C];
    let mut iacc = [_mm512_setzero_si512(); C];
    let pre: [__m512i; 8] = std::array::from_fn(|k| _mm512_loadu_si512(wq.as_ptr().add(k * 64).cast()));
    for b in 0..NB {
        let w = wq.as_ptr().add(b * 256);
        let xb = xq.as_ptr().add(b * C * 32);
        let scl = sc.as_ptr().add(b * 32);
        let dw = _mm512_cvtph_ps(_mm256_loadu_si256(scl.cast()));
        let mw = _mm512_cvtph_ps(_mm256_loadu_si256(scl.add(16).cast()));
        let mut ia = [_mm512_setzero_si512(); C];
        let mut ib = [_mm512_setzero_si512(); C];
        for u in 0..4 {
            let (lo, hi) = if MODE == 2 || MODE == 3 { (pre[2 * u], pre[2 * u + 1]) } else { unpack(w, u) };
            for c in 0..C {
                let x = xb.add(c * 32 + 4 * u);
                if MODE == 1 || MODE == 3 {
                    iacc[c] = _mm512_dpbusd_epi32(iacc[c], lo, bcast4!(x));
                    iacc[c] = _mm512_dpbusd_epi32(iacc[c], hi, bcast4!(x.add(16)));
                } else if MODE == 4 {
                    ia[c] = _mm512_dpbusd_epi32(ia[c], lo, bcast4!(x));
                    ib[c] = _mm512_dpbusd_epi32(ib[c], hi, bcast4!(x.add(16)));
                } else {
                    ia[c] = _mm512_dpbusd_epi32(ia[c], lo, bcast4!(x));
                    ia[c] = _mm512_dpbusd_epi32(ia[c], hi, bcast4!(x.add(16)));
                }
            }
        }
        if MODE != 1 && MODE != 3 {
            let db = d.as_ptr().add(b * C);
            let sb = s.as_ptr().add(b * C);
            for c in 0..C {
                let v = _mm512_cvtepi32_ps(_mm512_add_epi32(ia[c], ib[c]));
                facc[c] = _mm512_fmadd_ps(v, _mm512_mul_ps(dw, _mm512_set1_ps(*db.add(c))), facc[c]);
                if MODE != 5 {
                    facc[c] = _mm512_fmadd_ps(mw, _mm512_set1_ps(*sb.add(c)), facc[c]);
                }
            }
        }
    }
    for c in 0..C {
        let f = _mm512_add_ps(facc[c], _mm512_cvtepi32_ps(iacc[c]));
        _mm512_storeu_ps(out[c].as_mut_ptr(), f);
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn peak(n: usize) -> i32 {
    let mut a: [__m512i; 16] = std::array::from_fn(|i| _mm512_set1_epi32(i as i32));
    let w = _mm512_set1_epi8(3);
    let x = _mm512_set1_epi8(1);
    for _ in 0..n {
        for i in 0..16 { a[i] = _mm512_dpbusd_epi32(a[i], w, x); }
    }
    let mut s = a[0];
    for i in 1..16 { s = _mm512_add_epi32(s, a[i]); }
    _mm512_reduce_add_epi32(s)
}

fn bench<const C: usize, const MODE: u8>(wq: &[u8], sc: &[u16], xq: &[i8], d: &[f32], s: &[f32]) -> f64 {
    let mut out = [[0f32; 16]; 16];
    let iters = 200000 / C;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..iters { unsafe { kern::<C, MODE>(wq, sc, xq, d, s, &mut out) }; std::hint::black_box(&out); }
        let ns = t.elapsed().as_nanos() as f64 / (iters * NB * C) as f64;
        best = best.min(ns);
    }
    best
}

fn bench_big<const C: usize, const MODE: u8>(groups: usize, wq: &[u8], sc: &[u16], xq: &[i8], d: &[f32], s: &[f32]) -> f64 {
    let mut out = vec![[[0f32; 16]; 16]; groups];
    let iters = 4000 / C;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..iters {
            for g in 0..groups {
                unsafe { kern::<C, MODE>(&wq[g * NB * 256..], &sc[g * NB * 32..], xq, d, s, &mut out[g]) };
            }
            std::hint::black_box(&out);
        }
        let ns = t.elapsed().as_nanos() as f64 / (iters * groups * NB * C) as f64;
        best = best.min(ns);
    }
    best
}

fn main() {
    let wq: Vec<u8> = (0..NB * 256).map(|i| (i * 37 % 251) as u8).collect();
    let sc: Vec<u16> = (0..NB * 32).map(|i| 0x3c00 + (i % 7) as u16).collect();
    let xq: Vec<i8> = (0..NB * 16 * 32).map(|i| (i * 13 % 200) as i8).collect();
    let d: Vec<f32> = (0..NB * 16).map(|i| 1.0 + i as f32 * 1e-3).collect();
    let s = d.clone();
    let n = 20_000_000;
    let t = Instant::now();
    std::hint::black_box(unsafe { peak(n) });
    let ns_per = t.elapsed().as_nanos() as f64 / (n * 16) as f64;
    println!("peak: {:.4} ns per vpdpbusd ({:.2} G/s) -> 8 dp = {:.3} ns, 12 ops at peak = {:.3} ns", ns_per, 1.0 / ns_per, 8.0 * ns_per, 12.0 * ns_per);
    macro_rules! row { ($c:expr) => {{
        let r = [bench::<$c,0>(&wq,&sc,&xq,&d,&s), bench::<$c,1>(&wq,&sc,&xq,&d,&s), bench::<$c,2>(&wq,&sc,&xq,&d,&s), bench::<$c,3>(&wq,&sc,&xq,&d,&s), bench::<$c,4>(&wq,&sc,&xq,&d,&s), bench::<$c,5>(&wq,&sc,&xq,&d,&s)];
        println!("C={:2}  full {:.3}  nofold {:.3}  noupk {:.3}  dponly {:.3}  2chains {:.3}  noaffine {:.3}   (ns per row-block; in dp slots: full {:.1})", $c, r[0], r[1], r[2], r[3], r[4], r[5], r[0]/ns_per);
    }}; }
    for groups in [16usize, 96, 400] {
        let wq: Vec<u8> = (0..groups * NB * 256).map(|i| (i * 37 % 251) as u8).collect();
        let sc: Vec<u16> = (0..groups * NB * 32).map(|i| 0x3c00 + (i % 7) as u16).collect();
        let kb = groups * NB * 320 / 1024;
        println!("{} groups ({} KB): C=1 {:.3} C=8 {:.3}  C=12 {:.3}  nofold C=12 {:.3}", groups, kb,
          bench_big::<1,0>(groups,&wq,&sc,&xq,&d,&s), bench_big::<8,0>(groups,&wq,&sc,&xq,&d,&s), bench_big::<12,0>(groups,&wq,&sc,&xq,&d,&s), bench_big::<12,1>(groups,&wq,&sc,&xq,&d,&s));
    }
    row!(1); row!(2); row!(4); row!(8); row!(12); row!(16);
}
