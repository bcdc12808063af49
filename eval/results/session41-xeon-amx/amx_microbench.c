// AMX-INT8 tile products against the vector fold of their sums (session 41).
// The shapes of draftsmith's AMX kernels: per block of 32 values, one tdpbsud of C activation
// rows (A: C x 32 signed bytes) by one B tile (8 rows of 64 bytes: 16 weight rows), its sums
// stored (tilestored) and folded on the vector unit (cvt, scale, two FMAs per row) into float
// accumulators; blocks in rounds of 8, four products in flight.
// Build: gcc -O2 -march=sapphirerapids -o mb amx_microbench.c
// Run:   ./mb C VARIANT [x] [BLOCKS]   (C = 8 or 16 activation rows; BLOCKS default 48)
//   variant 0: products only; 1: folds only; 2: products of round k+1, then the fold of
//   round k (the kernels' order); 3: the same interleaved block by block; 4: all products,
//   then all folds. A third argument makes the folds read a buffer no tile store writes.
// Prints ns per block (all C rows).
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
typedef struct __attribute__((aligned(64))) {uint8_t palette,start;uint8_t r[14];uint16_t colsb[16];uint8_t rows[16];} cfg_t;
#define MM 16
static int8_t X[64*MM*32] __attribute__((aligned(64)));
static uint8_t W[64*512] __attribute__((aligned(64)));
static int32_t S[2][8][MM][16] __attribute__((aligned(64)));
static int32_t S2[2][8][MM][16] __attribute__((aligned(64)));
static int foldsrc=0;
static float D[64*MM], SB[64*MM];
static uint16_t SC[64*32];
#define P(c,a,b,x,w) _tile_zero(c); _tile_loadd(a,x,32); _tile_loadd(b,w,64); _tile_dpbsud(c,a,b);
static inline void products(int r,int b0){
  int j=0;
  for(;j<8;j+=4){
    P(2,0,4,X+(b0+j)*MM*32,W+(b0+j)*512) P(3,1,5,X+(b0+j+1)*MM*32,W+(b0+j+1)*512) P(6,0,4,X+(b0+j+2)*MM*32,W+(b0+j+2)*512) P(7,1,5,X+(b0+j+3)*MM*32,W+(b0+j+3)*512)
    _tile_stored(2,S[r][j],64);_tile_stored(3,S[r][j+1],64);_tile_stored(6,S[r][j+2],64);_tile_stored(7,S[r][j+3],64);
  }
}
static inline void fold(int r,int b0,__m512*facc,int C){
  for(int j=0;j<8;j++){
    int b=b0+j;
    __m512 dw=_mm512_cvtph_ps(_mm256_loadu_si256((void*)(SC+b*32)));
    __m512 mw=_mm512_cvtph_ps(_mm256_loadu_si256((void*)(SC+b*32+16)));
    for(int c=0;c<C;c++){
      __m512 s=_mm512_cvtepi32_ps(_mm512_load_si512(foldsrc? S2[r][j][c] : S[r][j][c]));
      facc[c]=_mm512_fmadd_ps(s,_mm512_mul_ps(dw,_mm512_set1_ps(D[b*C+c])),facc[c]);
      facc[c]=_mm512_fmadd_ps(mw,_mm512_set1_ps(SB[b*C+c]),facc[c]);
    }
  }
}
int main(int argc,char**argv){
  syscall(158,0x1023,18);
  int C=atoi(argv[1]); int variant=atoi(argv[2]); foldsrc=argc>3; int nb=argc>4?atoi(argv[4]):48; long N=20000000/nb;
  cfg_t c; memset(&c,0,sizeof c); c.palette=1;
  for(int t=0;t<8;t++){ c.rows[t]=C; c.colsb[t]=64; }
  c.colsb[0]=32; c.colsb[1]=32; c.rows[4]=8; c.rows[5]=8;
  _tile_loadconfig(&c);
  __m512 facc[16]; for(int i=0;i<16;i++) facc[i]=_mm512_setzero_ps();
  double t0=now();
  for(long i=0;i<N;i++){
    if(variant==0){ for(int k=0;k<nb/8;k++) products(k&1,k*8); }
    else if(variant==1){ for(int k=0;k<nb/8;k++) fold(k&1,k*8,facc,C); }
    else if(variant==3){ products(0,0); for(int k=0;k<nb/8;k++){ int r=k&1, b0=k*8, nr=(k+1)&1, nb0=(k+1)*8; int more=k+1<nb/8;
        for(int j=0;j<8;j++){
          if(more){ switch(j&3){
            case 0: P(2,0,4,X+(nb0+j)*MM*32,W+(nb0+j)*512) break;
            case 1: P(3,1,5,X+(nb0+j)*MM*32,W+(nb0+j)*512) break;
            case 2: P(6,0,4,X+(nb0+j)*MM*32,W+(nb0+j)*512) break;
            case 3: P(7,1,5,X+(nb0+j)*MM*32,W+(nb0+j)*512) _tile_stored(2,S[nr][j-3],64);_tile_stored(3,S[nr][j-2],64);_tile_stored(6,S[nr][j-1],64);_tile_stored(7,S[nr][j],64); break; } }
          int b=b0+j;
          __m512 dw=_mm512_cvtph_ps(_mm256_loadu_si256((void*)(SC+b*32)));
          __m512 mw=_mm512_cvtph_ps(_mm256_loadu_si256((void*)(SC+b*32+16)));
          for(int c=0;c<C;c++){
            __m512 s=_mm512_cvtepi32_ps(_mm512_load_si512(foldsrc? S2[r][j][c] : S[r][j][c]));
            facc[c]=_mm512_fmadd_ps(s,_mm512_mul_ps(dw,_mm512_set1_ps(D[b*C+c])),facc[c]);
            facc[c]=_mm512_fmadd_ps(mw,_mm512_set1_ps(SB[b*C+c]),facc[c]);
          }
        } } }
    else if(variant==4){ for(int k=0;k<nb/8;k++) products(0,0); for(int k=0;k<nb/8;k++) fold(k&1,k*8,facc,C); }
    else { products(0,0); for(int k=0;k<nb/8;k++){ if(k+1<nb/8) products((k+1)&1,(k+1)*8); fold(k&1,k*8,facc,C);} }
  }
  double t1=now();
  float s=0; for(int i=0;i<16;i++) s+=_mm512_reduce_add_ps(facc[i]);
  printf("C=%d variant %d: %.3f ns per block (%g)\n",C,variant,(t1-t0)/((double)N*nb)*1e9,s);
  return 0;
}
