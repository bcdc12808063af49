//! Microbenchmark, design 2: the weights are the A tile (16 weight rows × 32 values of a block,
//! bf16), built per block with a per-row-pair table (d·q + m for q = 0..15, two rows in one
//! register) and `vpermw` on the nibbles; the activations are the B tile (16 value pairs × up to
//! 16 activation rows); the f32 sums stay in tile registers over all blocks (no per-block fold).
use std::arch::asm;
use std::arch::x86_64::*;
use std::time::Instant;

const QK: usize = 32;

#[repr(C, align(64))]
struct TileConfig { palette: u8, start_row: u8, reserved: [u8; 14], colsb: [u16; 16], rows: [u8; 16] }

fn permission() -> bool {
    let ret: isize;
    unsafe {
        asm!("syscall", inlateout("rax") 158isize => ret, in("rdi") 0x1023usize, in("rsi") 18usize,
             lateout("rcx") _, lateout("r11") _, options(nostack));
    }
    ret == 0
}

unsafe fn configure(n: usize) {
    let mut cfg = TileConfig { palette: 1, start_row: 0, reserved: [0; 14], colsb: [0; 16], rows: [0; 16] };
    let nb = (n.min(16) * 4) as u16;
    for t in 0..4 { if n > 16 * t { cfg.colsb[t] = nb; cfg.rows[t] = 16; } } // sums [16 w rows][n]
    for t in [4, 6] { cfg.colsb[t] = 64; cfg.rows[t] = 16; } // weights
    for t in [5, 7] { cfg.colsb[t] = nb; cfg.rows[t] = 16; } // activations [16 pairs][n][2]
    asm!("ldtilecfg [{}]", in(reg) &cfg, options(nostack));
}

/// Per group (16 weight rows) and block: 256 bytes, row pair p at 32p: byte t = row 2p value t
/// (lo nibble) | row 2p+1 value t (hi nibble); scales: d[16], m[16] f32 per block.
struct Packed { q: Vec<u8>, s: Vec<f32>, nb: usize, groups: usize }

fn pack(w_q: &[u8], d: &[f32], m: &[f32], rows_total: usize, k: usize) -> Packed {
    let nb = k / QK;
    let groups = rows_total / 16;
    let mut q = vec![0u8; groups * nb * 256];
    let mut s = vec![0f32; groups * nb * 32];
    for g in 0..groups { for b in 0..nb {
        let qb = &mut q[(g * nb + b) * 256..][..256];
        for p in 0..8 { for t in 0..32 {
            let (r0, r1) = (g * 16 + 2 * p, g * 16 + 2 * p + 1);
            qb[32 * p + t] = w_q[r0 * k + b * QK + t] | (w_q[r1 * k + b * QK + t] << 4);
        }}
        for j in 0..16 {
            s[(g * nb + b) * 32 + j] = d[(g * 16 + j) * nb + b];
            s[(g * nb + b) * 32 + 16 + j] = m[(g * 16 + j) * nb + b];
        }
    }}
    Packed { q, s, nb, groups }
}

#[repr(C, align(64))]
struct ABuf([[u8; 1024]; 2]);

#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16,avx512vl")]
unsafe fn convert(qb: *const u8, sb: *const f32, out: *mut u8) {
    let qv = _mm512_setr_ps(0., 1., 2., 3., 4., 5., 6., 7., 8., 9., 10., 11., 12., 13., 14., 15.);
    let (low, top) = (_mm512_set1_epi16(0xF), _mm512_set1_epi16(0x10));
    for p in 0..8 {
        let x = _mm512_cvtepu8_epi16(_mm256_loadu_si256(qb.add(32 * p).cast()));
        let ia = _mm512_and_si512(x, low);
        let ib = _mm512_or_si512(_mm512_srli_epi16::<4>(x), top);
        let t0 = _mm512_fmadd_ps(qv, _mm512_set1_ps(*sb.add(2 * p)), _mm512_set1_ps(*sb.add(16 + 2 * p)));
        let t1 = _mm512_fmadd_ps(qv, _mm512_set1_ps(*sb.add(2 * p + 1)), _mm512_set1_ps(*sb.add(17 + 2 * p)));
        let table: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(t1, t0));
        _mm512_store_si512(out.add(128 * p).cast(), _mm512_permutexvar_epi16(ia, table));
        _mm512_store_si512(out.add(128 * p + 64).cast(), _mm512_permutexvar_epi16(ib, table));
    }
}

macro_rules! tile_mul {
    ($c:literal, $a:literal, $b:literal, $x:expr, $s:expr) => {
        asm!(concat!("tileloadd tmm", $b, ", [{x} + {s}*1]"), concat!("tdpbf16ps tmm", $c, ", tmm", $a, ", tmm", $b),
             x = in(reg) $x, s = in(reg) $s, options(nostack))
    };
}

/// x: bf16 activations laid out [block][act tile][16 pairs][min(n,16) rows][2].
/// mode: 0 full, 1 conversion only, 2 AMX only (A converted once).
#[target_feature(enable = "avx512f,avx512bw,avx512bf16,avx512vl")]
unsafe fn run(p: &Packed, x: &[u16], n: usize, out: &mut [f32], mode: u8, ab: &mut ABuf, tmp: &mut [[f32; 16]; 16]) {
    let tiles = n.div_ceil(16);
    let nw = n.min(16);
    let xs = nw * 4; // B row stride in bytes
    let tile_elems = 16 * nw * 2; // u16 per act tile per block
    let rows_total = p.groups * 16;
    if mode == 2 { convert(p.q.as_ptr(), p.s.as_ptr(), ab.0[0].as_mut_ptr()); convert(p.q.as_ptr(), p.s.as_ptr(), ab.0[1].as_mut_ptr()); }
    for g in 0..p.groups {
        if mode != 1 {
            asm!("tilezero tmm0", options(nostack));
            if tiles > 1 { asm!("tilezero tmm1", options(nostack)); }
            if tiles > 2 { asm!("tilezero tmm2", options(nostack)); }
            if tiles > 3 { asm!("tilezero tmm3", options(nostack)); }
        }
        for b in 0..p.nb {
            let buf = ab.0[b % 2].as_mut_ptr();
            if mode != 2 {
                convert(p.q.as_ptr().add((g * p.nb + b) * 256), p.s.as_ptr().add((g * p.nb + b) * 32), buf);
            }
            if mode == 1 { continue; }
            let xb = x.as_ptr().add(b * tiles * tile_elems);
            if b % 2 == 0 {
                asm!("tileloadd tmm4, [{w} + {s}*1]", w = in(reg) buf, s = in(reg) 64usize, options(nostack));
                tile_mul!("0", "4", "5", xb, xs);
                if tiles > 1 { tile_mul!("1", "4", "7", xb.add(tile_elems), xs); }
                if tiles > 2 { tile_mul!("2", "4", "5", xb.add(2 * tile_elems), xs); }
                if tiles > 3 { tile_mul!("3", "4", "7", xb.add(3 * tile_elems), xs); }
            } else {
                asm!("tileloadd tmm6, [{w} + {s}*1]", w = in(reg) buf, s = in(reg) 64usize, options(nostack));
                tile_mul!("0", "6", "5", xb, xs);
                if tiles > 1 { tile_mul!("1", "6", "7", xb.add(tile_elems), xs); }
                if tiles > 2 { tile_mul!("2", "6", "5", xb.add(2 * tile_elems), xs); }
                if tiles > 3 { tile_mul!("3", "6", "7", xb.add(3 * tile_elems), xs); }
            }
        }
        if mode == 1 { continue; }
        for t in 0..tiles {
            let tp = tmp.as_mut_ptr();
            match t {
                0 => asm!("tilestored [{o} + {s}*1], tmm0", o = in(reg) tp, s = in(reg) 64usize, options(nostack)),
                1 => asm!("tilestored [{o} + {s}*1], tmm1", o = in(reg) tp, s = in(reg) 64usize, options(nostack)),
                2 => asm!("tilestored [{o} + {s}*1], tmm2", o = in(reg) tp, s = in(reg) 64usize, options(nostack)),
                _ => asm!("tilestored [{o} + {s}*1], tmm3", o = in(reg) tp, s = in(reg) 64usize, options(nostack)),
            }
            for j in 0..16 { for c in 0..nw.min(n - 16 * t) {
                out[(16 * t + c) * rows_total + g * 16 + j] = tmp[j][c];
            }}
        }
    }
}

fn bf16(v: f32) -> u16 { let b = v.to_bits(); ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) as u16 }
fn from_bf16(h: u16) -> f32 { f32::from_bits((h as u32) << 16) }

fn main() {
    assert!(permission(), "no AMX permission");
    let args: Vec<String> = std::env::args().collect();
    let rows_total: usize = args.get(1).map(|s| s.parse().unwrap()).unwrap_or(256);
    let k: usize = args.get(2).map(|s| s.parse().unwrap()).unwrap_or(576);
    let iters: usize = args.get(3).map(|s| s.parse().unwrap()).unwrap_or(2000);
    let nb = k / QK;
    let mut seed = 12345u64;
    let mut rnd = || { seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); (seed >> 33) as u32 };
    let wq: Vec<u8> = (0..rows_total * k).map(|_| (rnd() % 16) as u8).collect();
    let d: Vec<f32> = (0..rows_total * nb).map(|_| half::f16::from_f32(0.001 + (rnd() % 1000) as f32 * 1e-5).to_f32()).collect();
    let m: Vec<f32> = (0..rows_total * nb).map(|i| half::f16::from_f32(-8.0 * d[i] * (0.9 + (rnd() % 100) as f32 * 0.002)).to_f32()).collect();
    let p = pack(&wq, &d, &m, rows_total, k);
    let mut ab = ABuf([[0; 1024]; 2]);
    let mut tmp = [[0f32; 16]; 16];
    println!("weight rows {rows_total} k {k} ({} KB nibbles), blocks per pass {}", p.q.len() / 1024, p.groups * nb);
    for n in [1usize, 2, 4, 8, 12, 16, 32, 48, 64] {
        unsafe { configure(n); }
        let (tiles, nw) = (n.div_ceil(16), n.min(16));
        let xf: Vec<f32> = (0..n * k).map(|_| (rnd() % 2000) as f32 / 1000.0 - 1.0).collect();
        let mut x = vec![0u16; nb * tiles * 16 * nw * 2];
        for r in 0..n { for kk in 0..k {
            let (b, t, c) = (kk / QK, r / 16, r % 16);
            let (pair, par) = ((kk % QK) / 2, kk % 2);
            x[((b * tiles + t) * 16 + pair) * nw * 2 + c * 2 + par] = bf16(xf[r * k + kk]);
        }}
        let mut out = vec![0f32; n * rows_total];
        unsafe { run(&p, &x, n, &mut out, 0, &mut ab, &mut tmp); }
        let mut maxrel = 0f64;
        for r in 0..n { for c in 0..rows_total {
            let mut acc = 0f64;
            for kk in 0..k {
                let w = from_bf16(bf16((wq[c * k + kk] as f32).mul_add(d[c * nb + kk / QK], m[c * nb + kk / QK])));
                acc += w as f64 * from_bf16(bf16(xf[r * k + kk])) as f64;
            }
            maxrel = maxrel.max((out[r * rows_total + c] as f64 - acc).abs() / (acc.abs() + 1e-3));
        }}
        let mut line = format!("n {n:2}: max rel err {maxrel:.1e}");
        for mode in [0u8, 1, 2] {
            let mut best = f64::MAX;
            for _ in 0..5 {
                let t = Instant::now();
                for _ in 0..iters { unsafe { run(&p, &x, n, &mut out, mode, &mut ab, &mut tmp); } }
                best = best.min(t.elapsed().as_secs_f64());
            }
            line += &format!(" | {} {:6.2} ns/block", ["full", "conv", "amx"][mode as usize], best / iters as f64 / (p.groups * nb) as f64 * 1e9);
        }
        println!("{line}");
    }
}
