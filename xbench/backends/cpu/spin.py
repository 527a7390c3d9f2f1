"""How long the threads of the libraries the cpu backend calls spin when idle: set in the environment before those
libraries load, which read it once.

Threads that spin after a parallel loop (libgomp's default) hold a core the rest of the machine wants; when another
process runs there, the next loop waits for the spinner's time slice: 6-16 ms for a 30 us softmax. OpenBLAS's
threads spin for 2^28 cycles (about 0.1 s) after each call before they sleep, holding the cores the next parallel
kernel, or torch's own threads, want; 2^16 cycles keeps them awake between back-to-back GEMMs only. Measured here
(2 cores), DeepFM's and the two-tower model's training steps went from 0.8-0.9x to 1.2x torch eager, and eager
itself, alternating in the same process, from 5,500 to 6,000 samples/s. scipy's OpenBLAS loads after this module;
a process that loaded it earlier keeps its own setting.

A process has one OpenMP runtime: numba's parallel loops and torch (its ops, its MKL) bind to whichever libgomp
loaded first. Where torch is already loaded, its runtime has read OMP_WAIT_POLICY, with the user's setting, and
this module leaves it alone; otherwise the runtime that loads later waits passively, torch's too: torch's eager
steps here then take 1.3-2.9x as long (docs/suite.md, Threads).
"""
import os
import sys

if "torch" not in sys.modules:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "16")
