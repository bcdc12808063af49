#!/usr/bin/env python3
# Pre-cut (crates/draftsmith-decode/src/methods/precut.rs) re-written in Python for quick
# what-ifs on a calibrated drafter; same learning rule, greedy return and exploration bonus.
import random, math, sys
class PC:
    def __init__(s, cost, verify, mode, seed, max_calls=32, bins=10, eps=0.5, decay=0.95, epsmin=0.01, alpha=0.1, gamma=0.99, bias=0.01, bonus=0.2):
        s.cost=cost; s.verify=verify; s.mode=mode; s.bins=bins; s.maxc=max_calls
        n=(max_calls+1)*bins
        s.q=[[bias,0.0] for _ in range(n)]; s.v=[[0,0] for _ in range(n)]
        s.eps=eps; s.decay=decay; s.epsmin=epsmin; s.alpha=alpha; s.gamma=gamma; s.bonus=bonus
        s.rng=random.Random(seed); s.rate=1.0; s.G=0.0; s.C=0.0
    def state(s,calls,e):
        b=min(int(min(max(e,0),1)*s.bins), s.bins-1); return min(calls,s.maxc)*s.bins+b
    def vc(s,t): return s.verify[t] if t < len(s.verify) else s.verify[-1]
    def greedy(s,st):
        c,st_=s.v[st]
        if c==0: return 'C'
        b=s.bonus*math.sqrt(math.log(1+st_)/c)
        return 'C' if s.q[st][0]+b>=s.q[st][1] else 'S'
    def decide(s,calls,e):
        st=s.state(calls,e)
        if s.rng.random()<s.eps: return 'C' if s.rng.random()<0.5 else 'S'
        return s.greedy(st)
    def upd(s,st,a,target):
        i=0 if a=='C' else 1
        s.v[st][i]+=1; r=max(s.alpha,1.0/s.v[st][i]); s.q[st][i]+=r*(target-s.q[st][i])
    def learn(s,steps,useful,maxt):
        states=[s.state(j+1,c) for j,(t,c) in enumerate(steps)]
        rew=[]
        for j,(t,c) in enumerate(steps):
            t=min(t,len(useful)); g=sum(useful[:t]); cost=s.vc(t)+(j+1)*s.cost
            if s.mode=='ratio': rew.append((g+1)/cost-1)
            else: rew.append((g+1)-s.rate*cost)
        last=len(steps)-1; open_=steps[last][0]<maxt
        def stops(j):
            c,_=s.v[states[j]]; return c==0 or s.q[states[j]][0]<s.q[states[j]][1]
        value = rew[last] if (not open_ or stops(last)) else s.q[states[last]][0]
        for j in range(last,-1,-1):
            s.upd(states[j],'S',rew[j])
            if j<last:
                s.upd(states[j],'C',s.gamma*value)
                value = rew[j] if stops(j) else s.gamma*value
        s.eps=max(s.eps*s.decay,s.epsmin)
    def observe(s,g,c):
        s.G+=g; s.C+=c; 
        if s.mode=='diff-run': s.rate=s.G/s.C

def run(seed,sure,mode,fixed=None,rounds=4000,cost=0.25,verify=None,lam=6):
    verify=verify or [1.0]
    pc=PC(cost,verify,mode if mode!='fixed' else 'ratio',seed)
    rng=random.Random(seed+1000); G=C=0.0
    for r in range(rounds):
        steps=[];useful=[];prod=1.0
        while True:
            c = 0.9+0.1*rng.random() if rng.random()<sure else 0.3+0.7*rng.random()
            prod*=c
            useful.append((not useful or useful[-1]) and rng.random()<c)
            steps.append((len(steps)+1,prod)); n=len(steps)
            if n>=(fixed or lam) or (fixed is None and pc.decide(n,prod)=='S'): break
        g=1+sum(useful); cst=(verify[n] if n<len(verify) else verify[-1])+cost*n
        if fixed is None: pc.learn(steps,useful,lam); pc.observe(g,cst)
        if r>=rounds//2: G+=g; C+=cst
    return G/C


# Session 61: exploration by CONTINUE only ("cont") against the paper's either action ("both"),
# with and without a rule bounding the drafts (stop once the confidence product falls below
# `thr`, standing in for the `auto` policy's rule). Speed over AR (Eq. 3) of a window of rounds,
# mean over 10 seeds.
def decide_cont(s, calls, e):
    st = s.state(calls, e)
    if s.rng.random() < s.eps:
        return 'C'
    return s.greedy(st)

def run2(seed, sure, explore, rounds, cost=0.25, verify=None, lam=6, window=(0, None), thr=None):
    pc = PC(cost, verify, 'ratio', seed)
    if explore == 'cont':
        pc.decide = lambda c, e: decide_cont(pc, c, e)
    rng = random.Random(seed + 1000); G = C = 0.0
    for r in range(rounds):
        steps = []; useful = []; prod = 1.0
        while True:
            c = 0.9 + 0.1 * rng.random() if rng.random() < sure else 0.3 + 0.7 * rng.random()
            prod *= c
            useful.append((not useful or useful[-1]) and rng.random() < c)
            steps.append((len(steps) + 1, prod)); n = len(steps)
            if n >= lam or pc.decide(n, prod) == 'S' or (thr is not None and prod < thr):
                break
        pc.learn(steps, useful, lam)
        g = 1 + sum(useful); cst = (verify[n] if n < len(verify) else verify[-1]) + cost * n
        if r >= window[0] and (window[1] is None or r < window[1]):
            G += g; C += cst
    return G / C

if __name__ == '__main__':
    verify = [1.0 + 0.075 * k for k in range(0, 9)]
    for thr in [None, 0.5, 0.3]:
        for sure in [0.7, 0.5, 0.0]:
            for win, name in [((0, 100), 'first 100'), ((2000, 4000), 'rounds 2000-4000')]:
                R = win[1]
                a = [run2(s, sure, 'both', R, verify=verify, window=win, thr=thr) for s in range(10)]
                b = [run2(s, sure, 'cont', R, verify=verify, window=win, thr=thr) for s in range(10)]
                print(f"rule {thr} sure {sure} {name}: both {sum(a)/10:.3f} cont {sum(b)/10:.3f}")
