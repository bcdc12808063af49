//! Microbenchmark: Q4_1 weights converted to bf16 (scale and minimum applied in f32, one RNE
//! rounding) in vector registers, multiplied by bf16 activation rows with AMX-BF16 tiles whose
//! f32 sums stay in the tile registers over every block (no per-block fold).
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

unsafe fn configure(c: usize) {
    let mut cfg = TileConfig { palette: 1, start_row: 0, reserved: [0; 14], colsb: [0; 16], rows: [0; 16] };
    for t in 0..4 { // sums
        let r = c.saturating_sub(16 * t).min(16);
        if r > 0 { cfg.colsb[t] = 64; cfg.rows[t] = r as u8; }
    }
    let r = c.min(16);
    for t in [4, 6] { cfg.colsb[t] = 64; cfg.rows[t] = r as u8; }
    for t in [5, 7] { cfg.colsb[t] = 64; cfg.rows[t] = 16; }
    asm!("ldtilecfg [{}]", in(reg) &cfg, options(nostack));
}

/// Packed weights of one group (16 columns) × nb blocks: per block 256 nibble bytes (B row r:
/// 16 bytes, byte p = lane p: lo nibble (col p/2, k 2r + p%2), hi nibble (col 8 + p/2, ...)),
/// and per block 4 f32 vectors: d_lo, d_hi, m_lo, m_hi (lane p = col p/2 or 8 + p/2).
struct Packed { q: Vec<u8>, s: Vec<f32>, nb: usize, groups: usize }

fn pack(w_q: &[u8], d: &[f32], m: &[f32], cols_total: usize, k: usize) -> Packed {
    // w_q[col][k] nibble, d/m[col][block]
    let nb = k / QK;
    let groups = cols_total / 16;
    let mut q = vec![0u8; groups * nb * 256];
    let mut s = vec![0f32; groups * nb * 64];
    for g in 0..groups { for b in 0..nb {
        let qb = &mut q[(g * nb + b) * 256..][..256];
        for r in 0..16 { for p in 0..16 {
            let (ci, kk) = (p / 2, b * QK + 2 * r + p % 2);
            let lo = w_q[(g * 16 + ci) * k + kk];
            let hi = w_q[(g * 16 + 8 + ci) * k + kk];
            qb[r * 16 + p] = lo | (hi << 4);
        }}
        let sb = &mut s[(g * nb + b) * 64..][..64];
        for p in 0..16 {
            sb[p] = d[(g * 16 + p / 2) * nb + b];
            sb[16 + p] = d[(g * 16 + 8 + p / 2) * nb + b];
            sb[32 + p] = m[(g * 16 + p / 2) * nb + b];
            sb[48 + p] = m[(g * 16 + 8 + p / 2) * nb + b];
        }
    }}
    Packed { q, s, nb, groups }
}

#[repr(C, align(64))]
struct BBuf([[u8; 1024]; 2]);

#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16,avx512vl")]
unsafe fn convert(qb: *const u8, sb: *const f32, out: *mut u8) {
    let (dlo, dhi) = (_mm512_loadu_ps(sb), _mm512_loadu_ps(sb.add(16)));
    let (mlo, mhi) = (_mm512_loadu_ps(sb.add(32)), _mm512_loadu_ps(sb.add(48)));
    let mask = _mm512_set1_epi32(0xF);
    for r in 0..16 {
        let x = _mm512_cvtepu8_epi32(_mm_loadu_si128(qb.add(16 * r).cast()));
        let lo = _mm512_and_si512(x, mask);
        let hi = _mm512_srli_epi32::<4>(x);
        let flo = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), dlo, mlo);
        let fhi = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), dhi, mhi);
        let bf: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(fhi, flo));
        _mm512_store_si512(out.add(64 * r).cast(), bf);
    }
}

macro_rules! tile_mul {
    ($c:literal, $a:literal, $b:literal, $x:expr) => {
        asm!(concat!("tileloadd tmm", $a, ", [{x} + {s}*1]"), concat!("tdpbf16ps tmm", $c, ", tmm", $a, ", tmm", $b),
             x = in(reg) $x, s = in(reg) 64usize, options(nostack))
    };
}

/// out[c][col] for c < rows, all groups. x: bf16 activations laid out [block][row][32].
/// mode: 0 full, 1 conversion only, 2 AMX only (B converted once).
#[target_feature(enable = "avx512f,avx512bw,avx512bf16,avx512vl")]
unsafe fn run(p: &Packed, x: &[u16], rows: usize, out: &mut [f32], mode: u8, bb: &mut BBuf) {
    let tiles = rows.div_ceil(16);
    let cols = p.groups * 16;
    if mode == 2 { convert(p.q.as_ptr(), p.s.as_ptr(), bb.0[0].as_mut_ptr()); convert(p.q.as_ptr(), p.s.as_ptr(), bb.0[1].as_mut_ptr()); }
    for g in 0..p.groups {
        if mode != 1 {
            asm!("tilezero tmm0", options(nostack));
            if tiles > 1 { asm!("tilezero tmm1", options(nostack)); }
            if tiles > 2 { asm!("tilezero tmm2", options(nostack)); }
            if tiles > 3 { asm!("tilezero tmm3", options(nostack)); }
        }
        for b in 0..p.nb {
            let buf = bb.0[b % 2].as_mut_ptr();
            if mode != 2 {
                convert(p.q.as_ptr().add((g * p.nb + b) * 256), p.s.as_ptr().add((g * p.nb + b) * 64), buf);
            }
            if mode == 1 { continue; }
            let xb = x.as_ptr().add(b * rows * QK);
            if b % 2 == 0 {
                asm!("tileloadd tmm5, [{w} + {s}*1]", w = in(reg) buf, s = in(reg) 64usize, options(nostack));
                tile_mul!("0", "4", "5", xb);
                if tiles > 1 { tile_mul!("1", "6", "5", xb.add(16 * QK)); }
                if tiles > 2 { tile_mul!("2", "4", "5", xb.add(32 * QK)); }
                if tiles > 3 { tile_mul!("3", "6", "5", xb.add(48 * QK)); }
            } else {
                asm!("tileloadd tmm7, [{w} + {s}*1]", w = in(reg) buf, s = in(reg) 64usize, options(nostack));
                tile_mul!("0", "4", "7", xb);
                if tiles > 1 { tile_mul!("1", "6", "7", xb.add(16 * QK)); }
                if tiles > 2 { tile_mul!("2", "4", "7", xb.add(32 * QK)); }
                if tiles > 3 { tile_mul!("3", "6", "7", xb.add(48 * QK)); }
            }
        }
        if mode == 1 { continue; }
        let o = out.as_mut_ptr().add(g * 16);
        let stride = cols * 4;
        asm!("tilestored [{o} + {s}*1], tmm0", o = in(reg) o, s = in(reg) stride, options(nostack));
        if tiles > 1 { asm!("tilestored [{o} + {s}*1], tmm1", o = in(reg) o.add(16 * cols), s = in(reg) stride, options(nostack)); }
        if tiles > 2 { asm!("tilestored [{o} + {s}*1], tmm2", o = in(reg) o.add(32 * cols), s = in(reg) stride, options(nostack)); }
        if tiles > 3 { asm!("tilestored [{o} + {s}*1], tmm3", o = in(reg) o.add(48 * cols), s = in(reg) stride, options(nostack)); }
    }
}

fn bf16(v: f32) -> u16 { // RNE
    let b = v.to_bits();
    ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) as u16
}
fn from_bf16(h: u16) -> f32 { f32::from_bits((h as u32) << 16) }

fn main() {
    assert!(permission(), "no AMX permission");
    let args: Vec<String> = std::env::args().collect();
    let cols: usize = args.get(1).map(|s| s.parse().unwrap()).unwrap_or(256);
    let k: usize = args.get(2).map(|s| s.parse().unwrap()).unwrap_or(576);
    let iters: usize = args.get(3).map(|s| s.parse().unwrap()).unwrap_or(2000);
    let nb = k / QK;
    let mut seed = 12345u64;
    let mut rnd = || { seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); (seed >> 33) as u32 };
    let wq: Vec<u8> = (0..cols * k).map(|_| (rnd() % 16) as u8).collect();
    let d: Vec<f32> = (0..cols * nb).map(|_| half::f16::from_f32(0.001 + (rnd() % 1000) as f32 * 1e-5).to_f32()).collect();
    let m: Vec<f32> = (0..cols * nb).map(|i| half::f16::from_f32(-8.0 * d[i] * (0.9 + (rnd() % 100) as f32 * 0.002)).to_f32()).collect();
    let p = pack(&wq, &d, &m, cols, k);
    let mut bb = BBuf([[0; 1024]; 2]);
    println!("cols {cols} k {k} ({} KB nibbles), blocks per pass {}", p.q.len() / 1024, p.groups * nb);
    for rows in [1usize, 2, 4, 8, 12, 16, 32, 48, 64] {
        unsafe { configure(rows); }
        // activations [block][row][32]
        let xf: Vec<f32> = (0..rows * k).map(|_| (rnd() % 2000) as f32 / 1000.0 - 1.0).collect();
        let mut x = vec![0u16; rows * k];
        for r in 0..rows { for kk in 0..k { x[(kk / QK) * rows * QK + r * QK + kk % QK] = bf16(xf[r * k + kk]); } }
        let mut out = vec![0f32; 64 * cols];
        // check vs scalar on bf16-rounded weights
        unsafe { run(&p, &x, rows, &mut out, 0, &mut bb); }
        let mut maxrel = 0f64;
        for r in 0..rows { for c in 0..cols {
            let mut acc = 0f64;
            for kk in 0..k {
                let w = from_bf16(bf16((wq[c * k + kk] as f32).mul_add(d[c * nb + kk / QK], m[c * nb + kk / QK])));
                acc += w as f64 * from_bf16(bf16(xf[r * k + kk])) as f64;
            }
            let got = out[r * cols + c] as f64;
            maxrel = maxrel.max((got - acc).abs() / (acc.abs() + 1e-3));
        }}
        let mut line = format!("rows {rows:2}: max rel err {maxrel:.1e}");
        for mode in [0u8, 1, 2] {
            let mut best = f64::MAX;
            for _ in 0..5 {
                let t = Instant::now();
                for _ in 0..iters { unsafe { run(&p, &x, rows, &mut out, mode, &mut bb); } }
                best = best.min(t.elapsed().as_secs_f64());
            }
            let ns_block = best / iters as f64 / (p.groups * nb) as f64 * 1e9;
            line += &format!(" | {} {:6.2} ns/block", ["full", "conv", "amx"][mode as usize], ns_block);
        }
        println!("{line}");
    }
}
