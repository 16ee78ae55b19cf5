# tests/kern/target.py — a target for kern_tool: a main thread that spins at a given
# recursion depth and a second thread that sleeps; prints each thread's native id, thread
# state address and (main) the code object addresses of its frames, innermost first.
import ctypes, sys, threading, time

depth = int(sys.argv[1]) if len(sys.argv) > 1 else 10
get = ctypes.pythonapi.PyThreadState_Get
get.restype = ctypes.c_void_p

def sleeper():
    print("sleeper tid=%d tstate=0x%x" % (threading.get_native_id(), get()), flush=True)
    while True:
        time.sleep(0.5)

def spin():
    f = sys._getframe()
    codes = []
    while f is not None:
        codes.append("0x%x:%s" % (id(f.f_code), f.f_code.co_name))
        f = f.f_back
    print("main tid=%d tstate=0x%x" % (threading.get_native_id(), get()), flush=True)
    print("codes " + " ".join(codes), flush=True)
    x = 0
    while True:
        x += 1

def recurse(n):
    if n <= 1:
        spin()
    else:
        recurse(n - 1)

threading.Thread(target=sleeper, daemon=True).start()
time.sleep(0.2)
recurse(depth)
