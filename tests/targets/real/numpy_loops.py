# Real-program target (tests/functional/real_tests.py): Debian's numpy called from Python
# loops on small arrays, as a simulation or a filter written by a scientist does, with
# pure-Python bookkeeping around it; the same work every iteration.
#
#   python numpy_loops.py READY
#
# One iteration: a Kalman filter over 200 steps (4x4 matrix products, a 2x2 inverse
# through np.linalg.solve, ufuncs on 4-element vectors), 100 steps of a 64-particle
# system (vectorised distances, np.where, clipping, a reduction), a histogram and sort of
# the results, and plain Python over them (a dict of bins, a list comprehension, string
# formatting of a report). Random numbers from a fixed seed, reset every iteration. Its
# steps are timed: kalman, particles, forces (within particles: the memory-bound part,
# whose share of particles moves most from one window to the next) and summarise; the loop, the clock, the marks
# and READY ({"numpy": VERSION} among its fields): stepclock.py, copied beside it.

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))    # -I leaves it out
import stepclock                                                  # noqa: E402
from stepclock import timed                                       # noqa: E402

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


def forces(pos):
    d = pos[:, None, :] - pos[None, :, :]
    r2 = np.einsum("ijk,ijk->ij", d, d) + np.eye(64)
    force = np.where(r2 < 0.25, 1.0 / r2, 0.0)
    np.fill_diagonal(force, 0.0)
    return (force[:, :, None] * d).sum(axis=1) * 1e-4


def particles(rng):
    pos = rng.uniform(-1.0, 1.0, (64, 2))
    vel = np.zeros((64, 2))
    energy = []
    for _ in range(100):
        acc = timed(forces, pos)
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
    track = timed(kalman, rng)
    pos, energy = timed(particles, rng)
    return timed(summarise, track, pos, energy)


if __name__ == "__main__":
    stepclock.run(iteration, (kalman, particles, forces, summarise), WARMUP, LIFETIME, {"numpy": np.__version__})
