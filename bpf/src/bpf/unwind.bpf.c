// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The unwind tables' types (see unwind.bpf.h, where the maps are). */
#include "common.bpf.h"
#include "unwind.bpf.h"

/* Forces the enum and structs user space writes into BTF, so the skeleton generates their
 * Rust types. */
enum unwind_cfa _unwind_cfa = 0;
