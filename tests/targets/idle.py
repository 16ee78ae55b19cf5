# Writes its pid to argv[1] (temp + rename) and blocks reading stdin until EOF.
# Kept to syntax every old CPython runs: it is the target of the test that
# remora refuses versions it does not read.
import os
import sys

f = open(sys.argv[1] + ".tmp", "w")
f.write(str(os.getpid()))
f.close()
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
sys.stdin.read()
