import sys, statistics as st
rows={}
for l in sys.stdin:
    if not l.startswith('SLOTS'): continue
    f=l.split(); n=f[1]; vals=[float(x.split('=')[1]) for x in f[2:5]]+[float(x) for x in f[5:]]
    rows.setdefault(n,[]).append(vals)
names='ms mat att norm1 split rope kvwrite resid+norm2 silu resid2 embed final+tensors logits_alloc lmhead logits_tensor'.split()
for n,v in rows.items():
    med=[st.median(c) for c in zip(*v)]
    print(n, len(v), ' '.join('%s=%.3f'%(a,b) for a,b in zip(names,med)))
