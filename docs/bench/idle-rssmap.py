# idle-rssmap.py PID BINARY [N]: which packages own the resident pages of the
# electord binary mapped by process PID (from /proc/PID/pagemap, run as root),
# each page split by the sizes of the symbols on it (go tool nm -size); prints
# the N largest (docs/bench/idle-profile-issue25.md).
import sys, struct, subprocess, collections, re, bisect
pid, binary = sys.argv[1], sys.argv[2]
PAGE = 4096
maps = []
for line in open(f"/proc/{pid}/maps"):
    f = line.split()
    if len(f) >= 6 and f[5].endswith(binary.split('/')[-1]):
        lo, hi = (int(x, 16) for x in f[0].split('-'))
        maps.append((lo, hi, f[1]))
syms = []
out = subprocess.run(["go", "tool", "nm", "-size", "-sort", "address", binary], capture_output=True, text=True).stdout
for line in out.splitlines():
    p = line.split()
    if len(p) < 4: continue
    addr, size, typ, name = int(p[0], 16), int(p[1]), p[2], " ".join(p[3:])
    syms.append((addr, size, typ, name))
syms.sort()
addrs = [s[0] for s in syms]
def pkg(name):
    n = name
    if n.startswith("go:") or n.startswith("type:") or n.startswith("runtime."):
        if n.startswith("type:"): return "type: (runtime type data)"
        if n.startswith("go:"): return n.split(".")[0][:40]
    m = re.match(r'^((?:[\w.\-~]+/)*[\w.\-~]+?)\.', n)
    return m.group(1) if m else n[:30]
def group(p):
    for pre in ("github.com/", "k8s.io/", "google.golang.org/", "golang.org/x/", "sigs.k8s.io/", "go.yaml.in/", "gopkg.in/"):
        if p.startswith(pre):
            parts = p.split("/")
            return "/".join(parts[:3]) if pre in ("github.com/", "golang.org/x/") else "/".join(parts[:2])
    return "std:" + p.split("/")[0]
res = collections.Counter(); resp = collections.Counter(); tot = 0
fd = open(f"/proc/{pid}/pagemap", "rb")
for lo, hi, perm in maps:
    fd.seek(lo // PAGE * 8)
    data = fd.read((hi - lo) // PAGE * 8)
    for i in range((hi - lo) // PAGE):
        v = struct.unpack_from("<Q", data, i * 8)[0]
        if not (v >> 63) & 1: continue
        tot += 1
        a = lo + i * PAGE
        # symbols overlapping [a, a+PAGE)
        j = bisect.bisect_right(addrs, a) - 1
        cover = collections.Counter()
        while j < len(syms) and syms[j][0] < a + PAGE:
            if j >= 0:
                s = syms[j]
                l = max(s[0], a); h = min(s[0] + max(s[1], 1), a + PAGE)
                if h > l: cover[pkg(s[3])] += h - l
            j += 1
        t = sum(cover.values())
        if t == 0:
            res[perm + " (no symbol: pclntab/other)"] += PAGE; continue
        for k, c in cover.items():
            res[perm + " " + group(k)] += PAGE * c / t
            resp[k] += PAGE * c / t
print(f"resident pages of {binary}: {tot} = {tot*PAGE/1048576:.1f} MiB")
for k, v in res.most_common(int(sys.argv[3]) if len(sys.argv) > 3 else 30):
    print(f"{v/1024:9.0f} KiB  {k}")
