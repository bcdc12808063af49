#ifndef TWO
#define TWO 0
#endif
#ifndef NOUNPACK
#define NOUNPACK 0
#endif
#ifndef NOSCALES
#define NOSCALES 0
#endif
#ifndef NOFOLD
#define NOFOLD 0
#endif
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
static long PD=4096;
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static signed char act[8*1536] __attribute__((aligned(64)));
// per block: 256 B quants (4 lines) + scales stream 40 B; group = 48 blocks (12 KB); prefetch next group's block b
#define GB (48*256)
static inline __attribute__((always_inline)) void blockk(const char*q,const char*nq, const unsigned short*s, const unsigned short*ns, int b, const int N, int pf, __m512 *facc, const signed char*xa, __m512i*iacc){
  if(pf==1){ for(int l=0;l<4;l++) _mm_prefetch(nq+b*256+64*l,_MM_HINT_T1); _mm_prefetch((const char*)(ns+b*20),_MM_HINT_T1);}
  if(pf==2){ for(int l=0;l<4;l++) _mm_prefetch(q+b*256+64*l+PD,_MM_HINT_T1); _mm_prefetch((const char*)(s+b*20)+PD*40/256,_MM_HINT_T1);}
  if(pf==3){ for(int l=0;l<4;l++) _mm_prefetch(nq+b*256+64*l,_MM_HINT_T0); _mm_prefetch((const char*)(ns+b*20),_MM_HINT_T0);}
  if(pf==4){ for(int l=0;l<4;l++) _mm_prefetch(nq+b*256+64*l,_MM_HINT_T1);}
  __m512i ia[8], ib[8];
  for(int c=0;c<N;c++) ib[c]=_mm512_setzero_si512();
  for(int c=0;c<N;c++) ia[c]=NOFOLD? iacc[c] : _mm512_setzero_si512();
  __m512i m4=_mm512_set1_epi8(15);
  for(int u=0;u<4;u++){
    __m512i w=_mm512_load_si512(q+b*256+64*u);
    __m512i lo=NOUNPACK? w : _mm512_and_si512(w,m4), hi=NOUNPACK? w : _mm512_and_si512(_mm512_srli_epi16(w,4),m4);
    for(int c=0;c<N;c++){
      const int* x=(const int*)(xa+c*1536+b*32+4*u);
      ia[c]=_mm512_dpbusd_epi32(ia[c],lo,_mm512_set1_epi32(x[0]));
      if(TWO) ib[c]=_mm512_dpbusd_epi32(ib[c],hi,_mm512_set1_epi32(x[4])); else ia[c]=_mm512_dpbusd_epi32(ia[c],hi,_mm512_set1_epi32(x[4]));
    }
  }
  __m512 d=_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(s+b*20)));
  if(NOFOLD){ for(int c=0;c<N;c++) iacc[c]=ia[c]; return; }
  for(int c=0;c<N;c++) facc[c]=_mm512_fmadd_ps(_mm512_cvtepi32_ps(TWO? _mm512_add_epi32(ia[c],ib[c]) : ia[c]),_mm512_mul_ps(d,_mm512_set1_ps(xa[c]*0.01f)),facc[c]);
}
static inline __attribute__((always_inline)) float runN(const char*Q,const unsigned short*S,size_t groups,size_t gmask,const int N,int pf){
  __m512 facc[8]; __m512i iacc[8]; for(int c=0;c<8;c++){ facc[c]=_mm512_setzero_ps(); iacc[c]=_mm512_setzero_si512();}
  float out=0;
  for(size_t g=0; g<groups; g++){
    size_t gg=g&gmask, gn=(g+1)&gmask;
    const char*q=Q+gg*GB, *nq=Q+gn*GB; const unsigned short*s=NOSCALES? S : S+gg*48*20, *ns=NOSCALES? S : S+gn*48*20;
    for(int c=0;c<N;c++) facc[c]=_mm512_setzero_ps();
    for(int b=0;b<48;b++) blockk(q,nq,s,ns,b,N,pf,facc,act,iacc);
    for(int c=0;c<N;c++) out+=_mm512_reduce_add_ps(facc[c])+_mm512_reduce_add_epi32(iacc[c]);
  }
  return out;
}
__attribute__((noinline)) float run(const char*Q,const unsigned short*S,size_t groups,size_t gmask,int N,int pf){
  switch(N){case 1:return runN(Q,S,groups,gmask,1,pf);case 2:return runN(Q,S,groups,gmask,2,pf);case 4:return runN(Q,S,groups,gmask,4,pf);case 8:return runN(Q,S,groups,gmask,8,pf);}
  return 0;
}
int main(int argc,char**argv){
  size_t groups=(1ul<<30)/GB; // ~1 GiB of quants
  char*Q=mmap(0,groups*GB+GB,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); madvise(Q,groups*GB+GB,MADV_HUGEPAGE); memset(Q,0x35,groups*GB+GB);
  size_t sb=groups*48*40+4096; unsigned short*S=mmap(0,sb,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); madvise(S,sb,MADV_HUGEPAGE); memset(S,0x11,sb);
  for(int i=0;i<8*1536;i++) act[i]=i%7;
  volatile float sink=0;
  int Ns[4]={1,2,4,8}; int PF=atoi(argv[1]); if(argc>2) PD=atol(argv[2]);
  for(int r=0;r<1;r++) for(int i=0;i<4;i++){ int N=Ns[i];
    double t0=now(); sink+=run(Q,S,groups,~0ul,N,PF); double t1=now();
    sink+=run(Q,S,groups,127,N,1); double t2=now(); // 128 groups = 1.5 MB in L2
    printf("N=%d: streamed %.1f ms, in L2 %.1f ms\n",N,(t1-t0)*1e3,(t2-t1)*1e3);
  }
  return sink==1.2345f;
}
