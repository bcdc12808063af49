"""Prints summary.txt: per A/B eval, `ar` ms/token, each method's speedup (95 % interval) from
its report, and the share of its steps that verified 8-10 draft nodes, from its records.

    python3 summ.py eval/runs/s56ab

Reads the runs' own directory (`r<round>/<binary>-<eval>/` with an uncompressed
records.jsonl, as `run.sh` writes it); the records are not kept under this folder, only the
reports and summary.txt.
"""
import json,sys,glob,os,collections
base=sys.argv[1]
for d in sorted(glob.glob(f"{base}/r*/*")):
    if not os.path.exists(f"{d}/report.md"): continue
    rep=open(f"{d}/report.md").read().splitlines()
    rows=[l for l in rep if l.startswith('| ') and '| yes |' in l]
    out=[]
    ar=None
    for l in rows:
        c=[x.strip() for x in l.split('|')]
        m=c[1]
        if m=='ar': ar=c[13]; continue
        out.append(f"{m} {c[10]} ({c[11]})")
    # sizes 8-10 share
    recs=[json.loads(l) for l in open(f"{d}/records.jsonl")]
    big=collections.Counter(); tot=collections.Counter()
    for r in recs:
        for s in r['steps']:
            tot[r['method']]+=1
            if 8<=s['tree_size']<=10: big[r['method']]+=1
    print(os.path.relpath(d,base), f"ar {ar} ms/tok |", '; '.join(out), '| 8-10 nodes %:', ' '.join(f"{m}:{100*big[m]/tot[m]:.1f}" for m in tot))
