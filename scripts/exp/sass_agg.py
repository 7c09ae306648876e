#!/usr/bin/env python3
# Aggregates an ncu --page source --csv --print-source sass export (scripts/exp/v14_ncu_src.sh):
# warp-state samples by stall reason, then the N instructions with the most samples.
# Usage: scripts/exp/sass_agg.py kernel_sass.csv [N]
import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1])))
hdr = rows[1]; data = rows[2:]
idx = {h:i for i,h in enumerate(hdr)}
stalls = [h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
tot = sum(int(r[idx['# Samples']] or 0) for r in data)
print('total samples', tot)
agg = collections.Counter()
for r in data:
    for s in stalls: agg[s] += int(r[idx[s]] or 0)
print('by reason:', ', '.join(f'{k[6:]} {v/tot*100:.1f}%' for k,v in agg.most_common(12)))
top = sorted(data, key=lambda r: -int(r[idx['# Samples']] or 0))[:int(sys.argv[2]) if len(sys.argv)>2 else 30]
for r in top:
    n = int(r[idx['# Samples']] or 0)
    rs = sorted(((int(r[idx[s]] or 0), s[6:]) for s in stalls), reverse=True)[:3]
    print(f"{r[0][-5:]} {n/tot*100:5.1f}% exec={r[idx['Instructions Executed']]:>8} {r[1].strip()[:60]:60s} " + ' '.join(f'{s}:{v}' for v,s in rs if v))
