#!/usr/bin/env python3
"""tests/bench/fault_soak.py: the fault soak of docs/MULTIPROCESS.md ("Fault soak").

Runs 4-process GPT jobs (PP2 x DP2 and TP2 x PP2, in turn) under
`mxmaca launch --max-restarts N` for --minutes of wall time while a driver injects faults at
random times:

  kill_rank         kill -9 of a random rank (at any moment: start-up, load, training)
  kill_during_save  kill -9 of a random rank while a checkpoint is being written (an
                    uncommitted iter_*.tmp-* directory exists; with --async-save that is
                    the background write)
  stop_rank         SIGSTOP of a random rank (alive, sockets open, silent: only the
                    heartbeat ring notices)
  disk_full         the --save file system filled to the last byte for 3..15 s (a tmpfs of
                    its own; needs the right to mount one, else this fault is left out)
  kill_launcher     kill -9 of `mxmaca launch` itself; its ranks must die with it and the
                    job is resubmitted (a new launcher on the same --save / --load)

Each job ("episode") runs to --train-iters; every other pair of episodes uses
--async-save. An episode passes when
  - its last checkpoint's shards are byte-identical to an uninterrupted run's of the same
    layout (and metadata.json's state and tensor table equal),
  - every iteration line it logged, in every attempt (redone iterations included), shows
    the uninterrupted run's consumed samples, learning rate, lm loss, loss scale, grad
    norm and skipped / nan counts,
  - no iter_*.tmp-* directory is left in --save and no process of the job is left.
A fault is "survived" when the episode it hit passed. The report gives faults injected and
survived per kind, restarts (by the launcher) and resubmissions (after kill_launcher), and
lost iterations (iteration lines logged beyond --train-iters: work redone after a fault;
the partial iteration a fault interrupts is not counted). Exit code 0 when every episode
passed.

Liveness: after each fault the driver waits until the job has committed a newer checkpoint
than the one it had when the fault hit, then waits a random 1..8 s before the next one, so
every episode ends.

  bazel run //tests/bench:fault_soak -- [--minutes 60] [--seed S] [--work DIR]
  python3 tests/bench/fault_soak.py --mxmaca bazel-bin/api/mxmaca --minutes 60
"""

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

KINDS = ["kill_rank", "kill_during_save", "stop_rank", "disk_full", "kill_launcher"]

BASE = ["--tokenizer-type", "NullTokenizer", "--vocab-size", "4096", "--mock-data",
        "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "64", "--max-position-embeddings", "64", "--micro-batch-size", "2",
        "--global-batch-size", "16", "--lr", "1e-3", "--min-lr", "1e-4",
        "--lr-decay-style", "cosine", "--lr-warmup-iters", "10", "--num-threads", "1",
        "--log-interval", "1", "--eval-iters", "0"]
# layout name -> (flags, train iters, save interval): ~25-40 s per uninterrupted job here.
LAYOUTS = {
    "pp2xdp2": (["--pipeline-model-parallel-size", "2"], 400, 20),
    "tp2xpp2": (["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
                 "--sequence-parallel"], 60, 4),
}
LINE = re.compile(r"iteration +(\d+)/ *\d+ \|(.*)")
COMPARED = ["consumed samples", "learning rate", "lm loss", "loss scale", "grad norm",
            "number of skipped iterations", "number of nan iterations"]


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def fields(rest):
    """The compared fields of one iteration line's text after 'iteration N/ M |'."""
    out = {}
    for part in rest.split("|"):
        if ":" in part:
            k, v = part.split(":", 1)
            if k.strip() in COMPARED:
                out[k.strip()] = v.strip()
    return out


def iteration_lines(path):
    """[(iteration, fields)] of every iteration line in a log, in order."""
    res = []
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if m:
                res.append((int(m.group(1)), fields(m.group(2))))
    return res


def latest(save):
    try:
        with open(os.path.join(save, "latest_checkpointed_iteration.txt")) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return 0


def checkpoint_digest(d):
    """{shard file: sha256} and metadata.json's state + tensors of one iter_* directory."""
    shards = {}
    for n in sorted(os.listdir(d)):
        if n.startswith("shard_"):
            with open(os.path.join(d, n), "rb") as f:
                shards[n] = hashlib.sha256(f.read()).hexdigest()
    with open(os.path.join(d, "metadata.json")) as f:
        meta = json.load(f)
    return shards, json.dumps([meta["state"], meta["tensors"]], sort_keys=True)


def job_pids(save):
    """{pid: rank} of the `mxmaca train` processes whose command line names `save`."""
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                argv = f.read().split(b"\0")
            if b"train" not in argv or save.encode() not in argv or b"launch" in argv:
                continue
            with open("/proc/%s/environ" % p, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        for e in env:
            if e.startswith(b"RANK="):
                out[int(p)] = int(e[5:])
    return out


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie is not alive
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


class Soak:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)
        self.work = os.path.abspath(a.work)
        self.disk = os.path.join(self.work, "disk")
        self.port = 20000 + self.rng.randrange(20000)
        self.kinds = list(KINDS)
        self.tmpfs = False
        self.stats = {k: {"injected": 0, "survived": 0} for k in KINDS}
        self.restarts = 0
        self.resubmissions = 0
        self.lost = 0
        self.episodes = []

    def next_port(self):
        self.port = 20000 + (self.port - 20000 + 7) % 20000
        return self.port

    def setup(self):
        os.makedirs(self.disk, exist_ok=True)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dm" % self.a.disk_mb, "tmpfs",
                            self.disk], capture_output=True, text=True)
        if r.returncode == 0:
            self.tmpfs = True
            log("--save file system: a %d MB tmpfs at %s" % (self.a.disk_mb, self.disk))
        else:
            self.kinds.remove("disk_full")
            log("cannot mount a tmpfs (%s): the disk_full fault is left out"
                % (r.stderr.strip() or "mount exited %d" % r.returncode))

    def teardown(self):
        if self.tmpfs:
            subprocess.run(["umount", "-l", self.disk])

    def command(self, layout, save, async_save, restarts):
        flags, iters, every = LAYOUTS[layout]
        cmd = [self.a.mxmaca, "launch", "--nproc-per-node", "4", "--master-port",
               str(self.next_port())]
        if restarts is not None:
            cmd += ["--max-restarts", str(restarts)]
        cmd += ["--", "train"] + BASE + flags + ["--train-iters", str(iters), "--save", save,
                                                 "--load", save, "--save-interval", str(every)]
        if async_save:
            cmd.append("--async-save")
        return cmd, iters

    def reference(self, layout):
        """An uninterrupted run: its iteration lines and last checkpoint's digest."""
        save = os.path.join(self.work, "ref_" + layout)
        shutil.rmtree(save, ignore_errors=True)
        cmd, iters = self.command(layout, save, False, None)
        path = os.path.join(self.work, "ref_%s.log" % layout)
        t0 = time.time()
        with open(path, "w") as out:
            rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT).returncode
        if rc != 0:
            sys.exit("the uninterrupted %s run failed (exit %d): see %s" % (layout, rc, path))
        lines = dict(iteration_lines(path))
        if sorted(lines) != list(range(1, iters + 1)):
            sys.exit("the uninterrupted %s run did not log iterations 1..%d" % (layout, iters))
        digest = checkpoint_digest(os.path.join(save, "iter_%07d" % iters))
        shutil.rmtree(save)
        log("reference %s: %d iterations in %.1f s" % (layout, iters, time.time() - t0))
        return lines, digest

    # ---- faults ----
    def victim(self, save):
        pids = job_pids(save)
        if not pids:
            return None
        pid = self.rng.choice(sorted(pids))
        return pid, pids[pid]

    def inject(self, kind, save, launcher, async_save, out):
        """Delivers one fault; returns a description, or None when there was nothing to hit
        (no ranks running) and the fault was not delivered. `out` is the episode's log (a
        full disk is marked there when it begins, as well as when it ends)."""
        if kind == "kill_rank" or kind == "stop_rank":
            v = self.victim(save)
            if v is None:
                return None
            os.kill(v[0], signal.SIGKILL if kind == "kill_rank" else signal.SIGSTOP)
            return "%s rank %d" % ("kill -9" if kind == "kill_rank" else "SIGSTOP", v[1])
        if kind == "kill_during_save":
            deadline = time.time() + 60
            while time.time() < deadline and alive(launcher.pid):
                try:
                    saving = any(".tmp-" in n for n in os.listdir(save))
                except OSError:
                    saving = False
                if saving:
                    v = self.victim(save)
                    if v is not None:
                        os.kill(v[0], signal.SIGKILL)
                        return "kill -9 rank %d during the %ssave after iteration %d" % (
                            v[1], "async " if async_save else "", latest(save))
                time.sleep(0.0005)
            return None
        if kind == "disk_full":
            filler = os.path.join(self.disk, "filler")
            hold = self.rng.uniform(3, 15)
            fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                for size in (1 << 20, 4096, 1):  # down to the last byte
                    block = b"\0" * size
                    try:
                        while True:
                            os.write(fd, block)
                    except OSError:
                        pass
            finally:
                os.close(fd)
            out.write("### fault_soak: --save file system full from now for %.1f s\n" % hold)
            out.flush()
            time.sleep(hold)
            os.remove(filler)
            return "--save file system full for %.1f s (ended)" % hold
        if kind == "kill_launcher":
            if not alive(launcher.pid):
                return None
            os.kill(launcher.pid, signal.SIGKILL)
            return "kill -9 of mxmaca launch (pid %d)" % launcher.pid
        raise ValueError(kind)

    def episode(self, n, layout, async_save, ref):
        save = os.path.join(self.disk, "ep%03d" % n)
        path = os.path.join(self.work, "ep%03d.log" % n)
        out = open(path, "w")
        faults = []
        resubmissions = 0
        ok, why = True, []
        t0 = time.time()
        cmd, iters = self.command(layout, save, async_save, self.a.max_restarts)
        launcher = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        last_fault_ckpt = -1
        next_at = time.time() + self.rng.uniform(1, 8)
        while True:
            if not alive(launcher.pid) or launcher.poll() is not None:
                rc = launcher.wait()
                if rc == 0:
                    break
                # Killed by us (kill_launcher) or the launcher gave up: its ranks must be gone
                # within 10 s; then resubmit.
                for _ in range(100):
                    if not job_pids(save):
                        break
                    time.sleep(0.1)
                left = job_pids(save)
                if left:
                    ok = False
                    why.append("ranks %s outlived their launcher (exit %d)"
                               % (sorted(left.values()), rc))
                    for p in left:
                        os.kill(p, signal.SIGKILL)
                if not (faults and faults[-1][0] == "kill_launcher" and faults[-1][2] == launcher.pid):
                    why.append("the launcher exited %d on its own (gave up)" % rc)
                    ok = False
                if time.time() - t0 > self.a.episode_limit_s:
                    why.append("not finished after %d s" % self.a.episode_limit_s)
                    ok = False
                    break
                resubmissions += 1
                cmd, iters = self.command(layout, save, async_save, self.a.max_restarts)
                out.write("### fault_soak: resubmitting the job\n")
                out.flush()
                launcher = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
                continue
            if time.time() - t0 > self.a.episode_limit_s:
                why.append("not finished after %d s" % self.a.episode_limit_s)
                ok = False
                launcher.kill()
                launcher.wait()
                break
            if (time.time() >= next_at and latest(save) > last_fault_ckpt
                    and time.time() < self.deadline):
                kind = self.rng.choice(self.kinds)
                ckpt = latest(save)
                what = self.inject(kind, save, launcher, async_save, out)
                if what is not None:
                    faults.append((kind, what, launcher.pid))
                    self.stats[kind]["injected"] += 1
                    last_fault_ckpt = ckpt
                    out.write("### fault_soak: %s\n" % what)
                    out.flush()
                    log("  episode %d: %s" % (n, what))
                next_at = time.time() + self.rng.uniform(1, 8)
            time.sleep(0.05)
        out.close()
        for p in job_pids(save):
            ok = False
            why.append("a rank (pid %d) was left running" % p)
            os.kill(p, signal.SIGKILL)

        # ---- checks ----
        lines = iteration_lines(path)
        with open(path, errors="replace") as f:
            text = f.read()
        restarts = len(re.findall(r"restarting the job \(\d+/\d+\)", text))
        bad = [(it, fl) for it, fl in lines if ref[0].get(it) != fl]
        if bad:
            ok = False
            it, fl = bad[0]
            why.append("%d iteration lines differ from the uninterrupted run, first: iteration %d"
                       " %s vs %s" % (len(bad), it, fl, ref[0].get(it)))
        if ok and sorted(set(it for it, _ in lines)) != list(range(1, iters + 1)):
            ok = False
            why.append("iterations 1..%d not all logged" % iters)
        final = os.path.join(save, "iter_%07d" % iters)
        if ok:
            try:
                if checkpoint_digest(final) != ref[1]:
                    ok = False
                    why.append("the last checkpoint differs from the uninterrupted run's")
            except (OSError, KeyError, ValueError) as e:
                ok = False
                why.append("the last checkpoint cannot be read: %s" % e)
        stale = [x for x in os.listdir(save) if ".tmp-" in x] if os.path.isdir(save) else []
        if stale:
            ok = False
            why.append("temporary save directories left behind: %s" % stale)
        lost = max(0, len(lines) - iters)
        for kind, _, _ in faults:
            if ok:
                self.stats[kind]["survived"] += 1
        self.restarts += restarts
        self.resubmissions += resubmissions
        self.lost += lost
        rec = {"episode": n, "layout": layout, "async_save": async_save, "ok": ok, "why": why,
               "faults": [f[1] for f in faults], "restarts": restarts,
               "resubmissions": resubmissions, "lost_iterations": lost,
               "seconds": round(time.time() - t0, 1), "log": path}
        self.episodes.append(rec)
        log("episode %d %s%s: %s in %.0f s, %d faults, %d restarts, %d resubmissions, %d lost "
            "iterations%s" % (n, layout, " --async-save" if async_save else "",
                              "PASS" if ok else "FAIL", rec["seconds"], len(faults), restarts,
                              resubmissions, lost, "" if ok else ": " + "; ".join(why)))
        if ok and not self.a.keep:
            shutil.rmtree(save, ignore_errors=True)

    def run(self):
        self.setup()
        try:
            refs = {k: self.reference(k) for k in LAYOUTS}
            start = time.time()
            self.deadline = start + self.a.minutes * 60
            n = 0
            while time.time() < self.deadline:
                layout = list(LAYOUTS)[n % len(LAYOUTS)]
                self.episode(n, layout, (n // 2) % 2 == 1, refs[layout])
                n += 1
            self.report(time.time() - start)
        finally:
            self.teardown()
        return all(e["ok"] for e in self.episodes)

    def report(self, seconds):
        print("\nfault soak: %d episodes in %.1f min (%s), seed %d" % (
            len(self.episodes), seconds / 60, ", ".join(
                "%s %d" % (k, sum(1 for e in self.episodes if e["layout"] == k))
                for k in LAYOUTS), self.a.seed))
        print("%-18s %9s %9s" % ("fault", "injected", "survived"))
        for k in KINDS:
            s = self.stats[k]
            note = "" if k in self.kinds else "  (left out: no tmpfs)"
            print("%-18s %9d %9d%s" % (k, s["injected"], s["survived"], note))
        tot_i = sum(s["injected"] for s in self.stats.values())
        tot_s = sum(s["survived"] for s in self.stats.values())
        print("%-18s %9d %9d" % ("all", tot_i, tot_s))
        print("restarts by the launcher: %d; resubmissions after kill_launcher: %d; lost "
              "iterations: %d; episodes passed: %d of %d" % (
                  self.restarts, self.resubmissions, self.lost,
                  sum(1 for e in self.episodes if e["ok"]), len(self.episodes)))
        with open(os.path.join(self.work, "fault_soak.json"), "w") as f:
            json.dump({"seconds": seconds, "seed": self.a.seed, "faults": self.stats,
                       "restarts": self.restarts, "resubmissions": self.resubmissions,
                       "lost_iterations": self.lost, "episodes": self.episodes}, f, indent=1)
        print("details: %s" % os.path.join(self.work, "fault_soak.json"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mxmaca", default=os.environ.get("MXMACA_BIN", "api/mxmaca"),
                   help="the mxmaca binary (default: $MXMACA_BIN or api/mxmaca)")
    p.add_argument("--minutes", type=float, default=60,
                   help="inject faults for this long; the last episode then finishes")
    p.add_argument("--seed", type=int, default=None, help="the driver's random seed")
    p.add_argument("--work", default=None, help="work directory (default: a new temp dir)")
    p.add_argument("--max-restarts", type=int, default=1000,
                   help="mxmaca launch --max-restarts for each submission")
    p.add_argument("--disk-mb", type=int, default=384, help="size of the --save tmpfs")
    p.add_argument("--episode-limit-s", type=int, default=1200,
                   help="an episode not finished after this long fails")
    p.add_argument("--keep", action="store_true", help="keep passed episodes' checkpoints")
    a = p.parse_args()
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1 << 30)
    if a.work is None:
        import tempfile
        a.work = tempfile.mkdtemp(prefix="fault_soak.")
    a.mxmaca = os.path.abspath(a.mxmaca)
    if not os.access(a.mxmaca, os.X_OK):
        sys.exit("fault_soak: --mxmaca %s is not an executable" % a.mxmaca)
    if a.minutes <= 0:
        sys.exit("fault_soak: --minutes %s: expected a positive number" % a.minutes)
    os.makedirs(a.work, exist_ok=True)
    log("fault soak for %g min, seed %d, work %s" % (a.minutes, a.seed, a.work))
    sys.exit(0 if Soak(a).run() else 1)


if __name__ == "__main__":
    main()
