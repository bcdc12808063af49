#ifndef BC
#define BC 0
#endif
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
// per 64-byte line: K vpdpbusd in 8 independent chains
static int xs[256];
static inline __attribute__((always_inline)) __m512i run_k(const char*buf, size_t bytes, size_t stride_mask, const int K, long dist, int pf){
  __m512i acc[8]; for(int i=0;i<8;i++) acc[i]=_mm512_setzero_si512();
  __m512i x=_mm512_set1_epi8(1);
  for(size_t off=0; off<bytes; off+=64){
    const char* p = buf + (off & stride_mask);
    if(pf) _mm_prefetch(p+dist, _MM_HINT_T1);
    __m512i w=_mm512_load_si512(p);
    _Pragma("GCC unroll 64") for(int k=0;k<K;k++) acc[k&7]=_mm512_dpbusd_epi32(acc[k&7],w,BC ? _mm512_set1_epi32(xs[(k*5+off/64)&255]) : x);
    if(K==0) acc[0]=_mm512_add_epi32(acc[0],w);
  }
  for(int i=1;i<8;i++) acc[0]=_mm512_add_epi32(acc[0],acc[i]);
  return acc[0];
}
__attribute__((noinline)) static __m512i run(const char*buf, size_t bytes, size_t m, int K, long dist, int pf){
  switch(K){case 0: return run_k(buf,bytes,m,0,dist,pf); case 8: return run_k(buf,bytes,m,8,dist,pf); case 16: return run_k(buf,bytes,m,16,dist,pf);
  case 24: return run_k(buf,bytes,m,24,dist,pf); case 32: return run_k(buf,bytes,m,32,dist,pf); case 48: return run_k(buf,bytes,m,48,dist,pf);}
  return _mm512_setzero_si512();
}
int main(int argc,char**argv){
  size_t bytes=1ul<<30; int K=atoi(argv[1]); long dist=atol(argv[2]);
  char*buf=mmap(0,bytes,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  madvise(buf,bytes,MADV_HUGEPAGE); memset(buf,1,bytes);
  volatile int sink=0;
  for(int r=0;r<3;r++){
    double t0=now(); __m512i a=run(buf,bytes,~0ul,0,dist,1); double t1=now();
    __m512i b=run(buf,bytes,(1<<14)-1,K,dist,0); double t2=now();  // compute on 16KB, L1
    __m512i c=run(buf,bytes,~0ul,K,dist,1); double t3=now();
    __m512i d=run(buf,bytes,~0ul,K,dist,0); double t4=now();
    sink+=_mm512_reduce_add_epi32(a)+_mm512_reduce_add_epi32(b)+_mm512_reduce_add_epi32(c)+_mm512_reduce_add_epi32(d);
    printf("K=%d dist=%ld: stream %.1f ms, compute %.1f ms, both %.1f ms, both-nopf %.1f ms\n",K,dist,(t1-t0)*1e3,(t2-t1)*1e3,(t3-t2)*1e3,(t4-t3)*1e3);
  }
  return sink==12345;
}
