# Real-program target (tests/functional/real_tests.py): Debian's numpy called from Python
# loops on small arrays, as a simulation or a filter written by a scientist does, with
# pure-Python bookkeeping around it; the same work every iteration (stationary:
# recordings made one after another see the same mix).
#
#   python numpy_loops.py READY
#
# One iteration: a Kalman filter over 200 steps (4x4 matrix products, a 2x2 inverse
# through np.linalg.solve, ufuncs on 4-element vectors), 100 steps of a 64-particle
# system (vectorised distances, np.where, clipping, a reduction), a histogram and sort of
# the results, and plain Python over them (a dict of bins, a list comprehension, string
# formatting of a report). Random numbers from a fixed seed, reset every iteration.
# After WARMUP iterations it writes READY (temp + rename): {"pid": N, "main": TID,
# "numpy": VERSION}. It polls stdin between iterations and exits at EOF, or after
# LIFETIME seconds whatever happens.

import json
import os
import select
import sys
import threading
import time

import numpy as np

WARMUP = 5
LIFETIME = 600.0

F = np.array([[1.0, 0.0, 0.1, 0.0], [0.0, 1.0, 0.0, 0.1], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
H = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
Q = np.eye(4) * 0.01
R = np.eye(2) * 0.5


def kalman_step(x, P, z):
    x = F @ x
    P = F @ P @ F.T + Q
    y = z - H @ x
    S = H @ P @ H.T + R
    K = np.linalg.solve(S, H @ P).T
    x = x + K @ y
    P = (np.eye(4) - K @ H) @ P
    return x, P


def kalman(rng):
    x, P = np.zeros(4), np.eye(4)
    track = []
    for step in range(200):
        z = np.array([step * 0.1, step * 0.05]) + rng.normal(0.0, 0.7, 2)
        x, P = kalman_step(x, P, z)
        track.append((float(x[0]), float(x[1]), float(np.trace(P))))
    return track


def particles(rng):
    pos = rng.uniform(-1.0, 1.0, (64, 2))
    vel = np.zeros((64, 2))
    energy = []
    for _ in range(100):
        d = pos[:, None, :] - pos[None, :, :]
        r2 = np.einsum("ijk,ijk->ij", d, d) + np.eye(64)
        force = np.where(r2 < 0.25, 1.0 / r2, 0.0)
        np.fill_diagonal(force, 0.0)
        acc = (force[:, :, None] * d).sum(axis=1) * 1e-4
        vel = np.clip(vel + acc, -0.05, 0.05)
        pos = pos + vel
        out = np.abs(pos) > 1.0
        vel[out] = -vel[out]
        energy.append(float(0.5 * (vel * vel).sum()))
    return pos, energy


def summarise(track, pos, energy):
    counts, edges = np.histogram(pos[:, 0], bins=8, range=(-1.5, 1.5))
    bins = {}
    for c, lo in zip(counts.tolist(), edges.tolist()):
        bins["%+.2f" % lo] = c
    slow = sorted(e for e in energy if e < np.median(energy))
    rows = ["%6.2f %6.2f %8.4f" % t for t in track[::20]]
    lines = [k + ": " + "#" * v for k, v in bins.items()]
    return len("\n".join(rows + lines)) + len(slow)


def iteration(i):
    del i
    rng = np.random.default_rng(12345)
    track = kalman(rng)
    pos, energy = particles(rng)
    return summarise(track, pos, energy)


def stdin_closed():
    """True once stdin reached EOF (polled, never blocking)."""
    while select.select([0], [], [], 0)[0]:
        if not os.read(0, 4096):
            return True
    return False


def write(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def main():
    start = time.monotonic()
    i = 0
    while True:
        iteration(i)
        i += 1
        if i == WARMUP:
            write(sys.argv[1], json.dumps({"pid": os.getpid(), "main": threading.get_native_id(),
                                           "numpy": np.__version__}))
        if stdin_closed() or time.monotonic() - start > LIFETIME:
            return


if __name__ == "__main__":
    main()
