/* tests/unit/main.c — the unit tests' runner: each part's tests (the unit_*.c beside it)
 * in turn, then one line, "unit: N passed, N failed" (tests/run_all.py reads it). Exits
 * 1 if a check failed. */
#include <stdio.h>

#include "unit.h"

int passed, failed;

int main(void)
{
    test_linetables();
    test_maps();
    test_stat();
    test_elf();
    test_strtab();
    test_upper();
    test_source_cache();
    test_json();
    test_text();
    test_fn_rows();
    test_marshal();
    test_pstats();
    test_native_frames();
    test_raw_sources();
    test_native_bounds();
    test_anchor_walk();
    test_objects_walk();
    test_lived_walk();
    test_moment_cut();
    test_call_locals();
    test_cframe_window();
    test_thread_names();
    test_tasks();
    test_pyo_readers();
    test_tasks_from_frames();
    test_pyrepr();
    test_off_weigh();
    test_kern_reads();
    test_ts_read();
    test_pthread_tid_offset();
    test_input_bounds();
    test_counts_words();
    printf("unit: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
