// The core clock from a chain of dependent integer adds (one per cycle).
// Build and run: gcc -O2 -o clock clock.c && ./clock   (session 79, Zen 3 guest: 3.20-3.21 GHz)
#include <stdio.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(){ long n=1000000000; long x=0; double t=now();
 for(long i=0;i<n;i++){ __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0":"+r"(x)); }
 double d=now()-t; printf("%.2f GHz (dependent adds/s)\n", 4.0*n/d/1e9); }
