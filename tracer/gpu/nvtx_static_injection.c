/*
 * nvtx_static_injection.c — links stepscope's NVTX handler into a program
 * without NVTX_INJECTION64_PATH, by NVTX's documented static-injection
 * mechanism: the NVTX headers in every translation unit declare weak, zero
 * `InitializeInjectionNvtx2_fnptr` / `InitializeInjectionNvtxExtension_fnptr`
 * symbols and call through them when they are non-zero; this file gives the
 * strong definitions. Link it (or the static library holding it) with
 * --whole-archive into a program that should capture its own NVTX ranges
 * in linked mode. It deliberately includes no NVTX header (those would
 * declare the weak versions here too).
 */
#include <stdint.h>

struct nvtxExtModuleInfo_t;
typedef const void *(*sgpu_nvtx_get_export_table)(uint32_t export_table_id);

int InitializeInjectionNvtx2(sgpu_nvtx_get_export_table get_export_table);
int InitializeInjectionNvtxExtension(struct nvtxExtModuleInfo_t *info);

int (*InitializeInjectionNvtx2_fnptr)(sgpu_nvtx_get_export_table) = InitializeInjectionNvtx2;
int (*InitializeInjectionNvtxExtension_fnptr)(struct nvtxExtModuleInfo_t *) =
    InitializeInjectionNvtxExtension;
