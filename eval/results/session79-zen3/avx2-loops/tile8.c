// The AVX2 Q4_1 tile's inner loop (one 32-column block of an 8-row half group against 8
// activation rows, as in crates/draftsmith-kernels/src/avx2.rs), in two forms: kA broadcasts
// each row's 4 activation bytes (vpbroadcastd), kB reads them pre-broadcast (plain loads).
// Build and run: gcc -O3 -mavx2 -mfma -o tile8 tile8.c && ./tile8   (GMAC/s on one core)
// Session 79, 2-core Zen 3 guest: A 81 / B 81 GMAC/s (the second and later rounds).
#include <immintrin.h>
#include <stdio.h>
#include <stdint.h>
#include <time.h>
#include <string.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define C 8
#define NB 18
// weights: NB blocks x 4 units x 32 bytes (one half group)
static uint8_t W[NB*4*32] __attribute__((aligned(64)));
static int8_t X[NB*C*32] __attribute__((aligned(64)));
static int8_t XE[NB*C*8*32] __attribute__((aligned(64))); // each 4-byte group expanded to 32 bytes
static float D[NB*C];
__attribute__((noinline)) void kA(float *out){
  __m256i low=_mm256_set1_epi8(0x0f), ones=_mm256_set1_epi16(1);
  __m256 facc[C]; for(int c=0;c<C;c++) facc[c]=_mm256_setzero_ps();
  for(int b=0;b<NB;b++){
    __m256i lo[4],hi[4];
    for(int u=0;u<4;u++){__m256i v=_mm256_load_si256((const __m256i*)(W+(b*4+u)*32)); lo[u]=_mm256_and_si256(v,low); hi[u]=_mm256_and_si256(_mm256_srli_epi16(v,4),low);}
    const int8_t *xb=X+b*C*32;
    for(int c=0;c<C;c++){
      __m256i acc=_mm256_setzero_si256();
      for(int u=0;u<4;u++){
        const int8_t *x=xb+c*32+4*u;
        __m256i p=_mm256_add_epi16(_mm256_maddubs_epi16(lo[u],_mm256_set1_epi32(*(const int32_t*)x)),_mm256_maddubs_epi16(hi[u],_mm256_set1_epi32(*(const int32_t*)(x+16))));
        acc=_mm256_add_epi16(acc,p);
      }
      __m256 f=_mm256_cvtepi32_ps(_mm256_madd_epi16(acc,ones));
      facc[c]=_mm256_fmadd_ps(f,_mm256_set1_ps(D[b*C+c]),facc[c]);
    }
  }
  for(int c=0;c<C;c++) _mm256_storeu_ps(out+8*c,facc[c]);
}
__attribute__((noinline)) void kB(float *out){
  __m256i low=_mm256_set1_epi8(0x0f), ones=_mm256_set1_epi16(1);
  __m256 facc[C]; for(int c=0;c<C;c++) facc[c]=_mm256_setzero_ps();
  for(int b=0;b<NB;b++){
    __m256i lo[4],hi[4];
    for(int u=0;u<4;u++){__m256i v=_mm256_load_si256((const __m256i*)(W+(b*4+u)*32)); lo[u]=_mm256_and_si256(v,low); hi[u]=_mm256_and_si256(_mm256_srli_epi16(v,4),low);}
    const int8_t *xb=XE+b*C*8*32;
    for(int c=0;c<C;c++){
      __m256i acc=_mm256_setzero_si256();
      for(int u=0;u<4;u++){
        const __m256i *x=(const __m256i*)(xb+(c*8+u)*32);
        __m256i p=_mm256_add_epi16(_mm256_maddubs_epi16(lo[u],_mm256_load_si256(x)),_mm256_maddubs_epi16(hi[u],_mm256_load_si256(x+4)));
        acc=_mm256_add_epi16(acc,p);
      }
      __m256 f=_mm256_cvtepi32_ps(_mm256_madd_epi16(acc,ones));
      facc[c]=_mm256_fmadd_ps(f,_mm256_set1_ps(D[b*C+c]),facc[c]);
    }
  }
  for(int c=0;c<C;c++) _mm256_storeu_ps(out+8*c,facc[c]);
}
int main(){
  for(int i=0;i<sizeof W;i++) W[i]=i*7; for(int i=0;i<sizeof X;i++) X[i]=(i*13)%255-127; for(int i=0;i<NB*C;i++) D[i]=1;
  for(int b=0;b<NB;b++)for(int c=0;c<C;c++)for(int g=0;g<8;g++)for(int r=0;r<8;r++) memcpy(XE+((b*C+c)*8+g)*32+4*r, X+(b*C+c)*32+4*g, 4);
  float o1[64],o2[64]; kA(o1); kB(o2); printf("same=%d\n", memcmp(o1,o2,sizeof o1)==0);
  for(int rep=0;rep<5;rep++){
    int N=200000; double t=now(); for(int i=0;i<N;i++){kA(o1); __asm__ volatile(""::"r"(o1):"memory");} double ta=now()-t;
    t=now(); for(int i=0;i<N;i++){kB(o2); __asm__ volatile(""::"r"(o2):"memory");} double tb=now()-t;
    double macs=(double)N*NB*C*256; printf("A %.1f GMAC/s  B %.1f GMAC/s\n", macs/ta/1e9, macs/tb/1e9);
  }
}
