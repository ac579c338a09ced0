// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The unwind tables (see unwind.bpf.h): defined here once, used by every program that takes
 * user stacks in DWARF mode. */
#include "common.bpf.h"
#include "unwind.bpf.h"

struct unwind_row unwind_rows[UNWIND_ROWS];
__u32 unwind_pages[UNWIND_PAGES];

/* Forces the enum and structs user space writes into BTF, so the skeleton generates their
 * Rust types. */
enum unwind_cfa _unwind_cfa = 0;
