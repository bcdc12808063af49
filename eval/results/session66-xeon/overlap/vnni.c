#include <immintrin.h>
#include <stdio.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define N 12
int main(){
  __m512i a[N]; __m512 f[N];
  for(int i=0;i<N;i++){a[i]=_mm512_set1_epi32(i);f[i]=_mm512_set1_ps(i*0.001f);}
  __m512i w=_mm512_set1_epi8(3), x=_mm512_set1_epi8(5);
  __m512 fw=_mm512_set1_ps(0.999f), fx=_mm512_set1_ps(0.0001f);
  long iters=100000000;
  double t0=now();
  for(long k=0;k<iters;k++){
    #pragma GCC unroll 12
    for(int i=0;i<N;i++) a[i]=_mm512_dpbusd_epi32(a[i],w,x);
    __asm__ volatile(""::"v"(a[0]),"v"(a[1]),"v"(a[2]),"v"(a[3]),"v"(a[4]),"v"(a[5]));
  }
  double t1=now();
  for(long k=0;k<iters;k++){
    #pragma GCC unroll 12
    for(int i=0;i<N;i++) f[i]=_mm512_fmadd_ps(f[i],fw,fx);
    __asm__ volatile(""::"v"(f[0]),"v"(f[1]),"v"(f[2]),"v"(f[3]),"v"(f[4]),"v"(f[5]));
  }
  double t2=now();
  __m256i b[N]; for(int i=0;i<N;i++) b[i]=_mm256_set1_epi32(i);
  __m256i w2=_mm256_set1_epi8(3), x2=_mm256_set1_epi8(5);
  for(long k=0;k<iters;k++){
    #pragma GCC unroll 12
    for(int i=0;i<N;i++) b[i]=_mm256_dpbusd_epi32(b[i],w2,x2);
    __asm__ volatile(""::"x"(b[0]),"x"(b[1]),"x"(b[2]),"x"(b[3]),"x"(b[4]),"x"(b[5]));
  }
  double t3=now();
  int s=0; for(int i=0;i<N;i++){s+=_mm512_reduce_add_epi32(a[i]); s+=(int)_mm512_reduce_add_ps(f[i]); s+=_mm256_extract_epi32(b[i],0);}
  printf("ns per instr: vpdpbusd zmm %.3f, vfmadd zmm %.3f, vpdpbusd ymm %.3f (%d)\n",(t1-t0)/iters/N*1e9,(t2-t1)/iters/N*1e9,(t3-t2)/iters/N*1e9,s);
}
