// Issue rates on one core, twelve independent chains in inline assembly: vpmaddubsw alone,
// vpaddw alone, the two interleaved, and a vpmaddubsw whose result a vpaddw adds up (with its
// activation broadcast from memory, or as a memory operand). Printed per cycle at 3.2 GHz.
// Build and run: gcc -O2 -mavx2 -o pairs pairs.c && ./pairs
// Session 79, 2-core Zen 3 guest: 2.0 / 3.3-3.5 / 2.7 / 1.4 / 1.55.
#include <stdio.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static char buf[64] __attribute__((aligned(64)));

__attribute__((noinline)) void xm(long n){ __asm__ volatile(
"vpxor %%ymm12,%%ymm12,%%ymm12\n\t"
"1:\n\t"
"vpmaddubsw %%ymm12,%%ymm0,%%ymm0\n\t"
"vpmaddubsw %%ymm12,%%ymm1,%%ymm1\n\t"
"vpmaddubsw %%ymm12,%%ymm2,%%ymm2\n\t"
"vpmaddubsw %%ymm12,%%ymm3,%%ymm3\n\t"
"vpmaddubsw %%ymm12,%%ymm4,%%ymm4\n\t"
"vpmaddubsw %%ymm12,%%ymm5,%%ymm5\n\t"
"vpmaddubsw %%ymm12,%%ymm6,%%ymm6\n\t"
"vpmaddubsw %%ymm12,%%ymm7,%%ymm7\n\t"
"vpmaddubsw %%ymm12,%%ymm8,%%ymm8\n\t"
"vpmaddubsw %%ymm12,%%ymm9,%%ymm9\n\t"
"vpmaddubsw %%ymm12,%%ymm10,%%ymm10\n\t"
"vpmaddubsw %%ymm12,%%ymm11,%%ymm11\n\t"

"dec %0\n\t jnz 1b\n\t" : "+r"(n) :: "xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8","xmm9","xmm10","xmm11","xmm12","xmm13","xmm14","xmm15","cc","memory"); }
__attribute__((noinline)) void xa(long n){ __asm__ volatile(
"vpxor %%ymm12,%%ymm12,%%ymm12\n\t"
"1:\n\t"
"vpaddw %%ymm12,%%ymm0,%%ymm0\n\t"
"vpaddw %%ymm12,%%ymm1,%%ymm1\n\t"
"vpaddw %%ymm12,%%ymm2,%%ymm2\n\t"
"vpaddw %%ymm12,%%ymm3,%%ymm3\n\t"
"vpaddw %%ymm12,%%ymm4,%%ymm4\n\t"
"vpaddw %%ymm12,%%ymm5,%%ymm5\n\t"
"vpaddw %%ymm12,%%ymm6,%%ymm6\n\t"
"vpaddw %%ymm12,%%ymm7,%%ymm7\n\t"
"vpaddw %%ymm12,%%ymm8,%%ymm8\n\t"
"vpaddw %%ymm12,%%ymm9,%%ymm9\n\t"
"vpaddw %%ymm12,%%ymm10,%%ymm10\n\t"
"vpaddw %%ymm12,%%ymm11,%%ymm11\n\t"

"dec %0\n\t jnz 1b\n\t" : "+r"(n) :: "xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8","xmm9","xmm10","xmm11","xmm12","xmm13","xmm14","xmm15","cc","memory"); }
__attribute__((noinline)) void xmix(long n){ __asm__ volatile(
"vpxor %%ymm12,%%ymm12,%%ymm12\n\t"
"1:\n\t"
"vpmaddubsw %%ymm12,%%ymm0,%%ymm0\n\t"
"vpaddw %%ymm12,%%ymm1,%%ymm1\n\t"
"vpmaddubsw %%ymm12,%%ymm2,%%ymm2\n\t"
"vpaddw %%ymm12,%%ymm3,%%ymm3\n\t"
"vpmaddubsw %%ymm12,%%ymm4,%%ymm4\n\t"
"vpaddw %%ymm12,%%ymm5,%%ymm5\n\t"
"vpmaddubsw %%ymm12,%%ymm6,%%ymm6\n\t"
"vpaddw %%ymm12,%%ymm7,%%ymm7\n\t"
"vpmaddubsw %%ymm12,%%ymm8,%%ymm8\n\t"
"vpaddw %%ymm12,%%ymm9,%%ymm9\n\t"
"vpmaddubsw %%ymm12,%%ymm10,%%ymm10\n\t"
"vpaddw %%ymm12,%%ymm11,%%ymm11\n\t"

"dec %0\n\t jnz 1b\n\t" : "+r"(n) :: "xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8","xmm9","xmm10","xmm11","xmm12","xmm13","xmm14","xmm15","cc","memory"); }
__attribute__((noinline)) void xbm(long n, const void *p){ __asm__ volatile(
"vpxor %%ymm12,%%ymm12,%%ymm12\n\t"
"1:\n\t"
"vpbroadcastd (%1),%%ymm13\n\t vpmaddubsw %%ymm13,%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm0,%%ymm0\n\t"
"vpbroadcastd (%1),%%ymm13\n\t vpmaddubsw %%ymm13,%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm1,%%ymm1\n\t"
"vpbroadcastd (%1),%%ymm13\n\t vpmaddubsw %%ymm13,%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm2,%%ymm2\n\t"
"vpbroadcastd (%1),%%ymm13\n\t vpmaddubsw %%ymm13,%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm3,%%ymm3\n\t"
"vpbroadcastd (%1),%%ymm13\n\t vpmaddubsw %%ymm13,%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm4,%%ymm4\n\t"
"vpbroadcastd (%1),%%ymm13\n\t vpmaddubsw %%ymm13,%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm5,%%ymm5\n\t"
"vpbroadcastd (%1),%%ymm13\n\t vpmaddubsw %%ymm13,%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm6,%%ymm6\n\t"
"vpbroadcastd (%1),%%ymm13\n\t vpmaddubsw %%ymm13,%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm7,%%ymm7\n\t"
"vpbroadcastd (%1),%%ymm13\n\t vpmaddubsw %%ymm13,%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm8,%%ymm8\n\t"
"vpbroadcastd (%1),%%ymm13\n\t vpmaddubsw %%ymm13,%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm9,%%ymm9\n\t"
"vpbroadcastd (%1),%%ymm13\n\t vpmaddubsw %%ymm13,%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm10,%%ymm10\n\t"
"vpbroadcastd (%1),%%ymm13\n\t vpmaddubsw %%ymm13,%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm11,%%ymm11\n\t"

"dec %0\n\t jnz 1b\n\t" : "+r"(n) : "r"(p) : "xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8","xmm9","xmm10","xmm11","xmm12","xmm13","xmm14","xmm15","cc","memory"); }
__attribute__((noinline)) void xlm(long n, const void *p){ __asm__ volatile(
"vpxor %%ymm12,%%ymm12,%%ymm12\n\t"
"1:\n\t"
"vpmaddubsw (%1),%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm0,%%ymm0\n\t"
"vpmaddubsw (%1),%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm1,%%ymm1\n\t"
"vpmaddubsw (%1),%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm2,%%ymm2\n\t"
"vpmaddubsw (%1),%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm3,%%ymm3\n\t"
"vpmaddubsw (%1),%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm4,%%ymm4\n\t"
"vpmaddubsw (%1),%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm5,%%ymm5\n\t"
"vpmaddubsw (%1),%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm6,%%ymm6\n\t"
"vpmaddubsw (%1),%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm7,%%ymm7\n\t"
"vpmaddubsw (%1),%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm8,%%ymm8\n\t"
"vpmaddubsw (%1),%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm9,%%ymm9\n\t"
"vpmaddubsw (%1),%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm10,%%ymm10\n\t"
"vpmaddubsw (%1),%%ymm12,%%ymm14\n\t vpaddw %%ymm14,%%ymm11,%%ymm11\n\t"

"dec %0\n\t jnz 1b\n\t" : "+r"(n) : "r"(p) : "xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8","xmm9","xmm10","xmm11","xmm12","xmm13","xmm14","xmm15","cc","memory"); }
int main(){ long n=100000000; for(int r=0;r<3;r++){
 double t=now(); xm(n); double t1=now()-t; t=now(); xa(n); double t2=now()-t; t=now(); xmix(n); double t3=now()-t;
 t=now(); xbm(n,buf); double t4=now()-t; t=now(); xlm(n,buf); double t5=now()-t;
 double c=3.2e9; printf("ops/cycle: maddubs %.2f add %.2f mix %.2f | bcast+maddubs+add %.2f maddubs(mem)+add %.2f (maddubs per cycle)\n", 12*n/t1/c, 12*n/t2/c, 12*n/t3/c, 12*n/t4/c, 12*n/t5/c);}}
