/* util/err.c — names and exit codes of remora's error codes. */
#include "remora.h"
#include "util.h"

const char *remora_strerror(int err)
{
    switch (err) {
    case REMORA_OK: return "success";
    case REMORA_EUSAGE: return "bad usage";
    case REMORA_ENOPROC: return "no such process";
    case REMORA_EPERM: return "permission denied";
    case REMORA_ENOTPY: return "not a CPython process";
    case REMORA_EVERSION: return "unsupported Python version";
    case REMORA_EFAULT: return "address not mapped in the target";
    case REMORA_ECORRUPT: return "inconsistent data in the target";
    case REMORA_ENOMEM: return "out of memory";
    case REMORA_EIO: return "input/output error";
    default: return "unknown error";
    }
}

int remora_exit_code(int err)
{
    switch (err) {
    case REMORA_OK: return REMORA_EXIT_OK;
    case REMORA_EUSAGE: return REMORA_EXIT_USAGE;
    case REMORA_ENOPROC: return REMORA_EXIT_NOPROC;
    case REMORA_EPERM: return REMORA_EXIT_PERM;
    case REMORA_ENOTPY:
    case REMORA_EVERSION: return REMORA_EXIT_NOTPY;
    default: return REMORA_EXIT_FAIL;
    }
}
