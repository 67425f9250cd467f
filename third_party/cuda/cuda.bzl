"""cuda_library: compiles .cu files with nvcc in a genrule and wraps the objects.

Each .cu in `srcs` becomes one .o (`-Xcompiler -fPIC`, SASS for sm_90a and sm_100a plus
compute_90 PTX for anything newer); `.cc` files in `srcs` are compiled by the C++
toolchain as usual. Objects and `.cc` files go into one cc_library with `deps` plus
cudart and the CUDA headers. nvcc sees the .cu, this package's headers, `hdrs` and
`extra_hdrs` (header files of other packages the .cu includes, e.g.
"//kernels:exec_context.h"), with the workspace root on the include path.

Without CUDA (HAS_CUDA = False, e.g. `--config=nocuda`) the library builds `cpu_srcs`
instead (usually nothing), so targets depending on it still build; code that includes
its headers must itself be CUDA-only (see `cuda_only_test` in kernels/cuda/BUILD).
"""

load("@local_cuda//:defs.bzl", "HAS_CUDA", "NVCC")

_GENCODE = (
    "-gencode arch=compute_90a,code=sm_90a " +
    "-gencode arch=compute_100a,code=sm_100a " +
    "-gencode arch=compute_90,code=compute_90"
)

NVCC_FLAGS = "-std=c++17 -O3 --expt-relaxed-constexpr --extended-lambda -Xcompiler -fPIC -Xcompiler -O3 " + _GENCODE

def cuda_library(name, srcs = [], hdrs = [], deps = [], cpu_srcs = [], copts = [], extra_hdrs = [], **kwargs):
    if not HAS_CUDA:
        native.cc_library(name = name, srcs = cpu_srcs, hdrs = hdrs, deps = deps, **kwargs)
        return
    objs = []
    cc_srcs = []
    for src in srcs:
        if not src.endswith(".cu"):
            cc_srcs.append(src)
            continue
        base = src.replace("/", "_").rsplit(".", 1)[0]
        obj = "_cuda_objs/%s/%s.o" % (name, base)
        native.genrule(
            name = "%s_%s_nvcc" % (name, base),
            srcs = depset([src] + hdrs + native.glob(["**/*.h", "**/*.cuh"]) + extra_hdrs).to_list(),
            outs = [obj],
            cmd = "%s %s -I. -I$(GENDIR) %s -c $(location %s) -o $@" % (
                NVCC,
                NVCC_FLAGS,
                " ".join(copts),
                src,
            ),
            message = "nvcc %s" % src,
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs + cc_srcs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart", "@local_cuda//:headers"],
        linkstatic = True,
        **kwargs
    )
