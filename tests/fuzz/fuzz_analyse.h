/*
 * fuzz_analyse.h — what both fuzz targets (tests/fuzz/reader, tests/fuzz/kineto)
 * do with the ranks they parsed: build a run, analyse it (as a whole and for
 * rank 0 with a step filter), write the JSON report, the text report and the
 * Chrome export to /dev/null. So the fuzzers reach every piece of analysis
 * code with what a hostile file can make the model hold (times near the
 * int64 limits, empty arrays, odd world sizes), under ASan and UBSan.
 */
#ifndef FUZZ_ANALYSE_H
#define FUZZ_ANALYSE_H

#include <stddef.h>

#include "ssa_model.h"

/* Takes ownership of `ranks` (allocated with malloc/calloc, filled by a
 * loader, not yet finished). Aborts when an output is not valid or a
 * failure has no message. */
void fuzz_analyse_ranks(ssa_rank *ranks, size_t nranks);

#endif
