#!/usr/bin/env python3
# Speed of post-use-precut over draft-model per eval (records.jsonl or .gz), with a 95 % percentile
# bootstrap over the prompts (2000 resamples, paired by prompt). Usage: relative_speed.py RECORDS...
import json,gzip,sys,random
def load(p):
    op = gzip.open if p.endswith('.gz') else open
    return [json.loads(l) for l in op(p,'rt')]
def rel(path, a='draft-model', b='post-use-precut'):
    recs=load(path)
    by={}
    for r in recs: by.setdefault(r['prompt_id'],{})[r['method']]=r
    rows=[(p[a]['decode_ms'],len(p[a]['output_ids'])-1,p[b]['decode_ms'],len(p[b]['output_ids'])-1) for p in by.values() if a in p and b in p]
    def est(rs):
        s=[sum(x[i] for x in rs) for i in range(4)]
        return (s[0]/s[1])/(s[2]/s[3])
    rng=random.Random(1)
    bs=sorted(est([rows[rng.randrange(len(rows))] for _ in rows]) for _ in range(2000))
    return est(rows), bs[50], bs[1949]
for p in sys.argv[1:]:
    e,lo,hi=rel(p)
    print(f"{p}: post-use-precut speed / draft-model speed = {e:.3f} (95% {lo:.3f}-{hi:.3f})")
