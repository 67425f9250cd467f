"""cuda_library: compiles .cu files with nvcc in a genrule and wraps the objects.

Each .cu becomes one .o (`-Xcompiler -fPIC`, sm_90a, sm_100a and compute_90 PTX);
the objects go into a cc_library with `deps`. Without CUDA (HAS_CUDA = False) the
library builds `cpu_srcs` instead, so targets depending on it still link.
"""

load("@local_cuda//:defs.bzl", "HAS_CUDA", "NVCC")

_GENCODE = (
    "-gencode arch=compute_90a,code=sm_90a " +
    "-gencode arch=compute_100a,code=sm_100a " +
    "-gencode arch=compute_90,code=compute_90"
)

def cuda_library(name, srcs = [], hdrs = [], deps = [], cpu_srcs = [], copts = [], **kwargs):
    if not HAS_CUDA:
        native.cc_library(name = name, srcs = cpu_srcs, hdrs = hdrs, deps = deps, **kwargs)
        return
    objs = []
    for src in srcs:
        base = src.replace("/", "_").rsplit(".", 1)[0]
        obj = "_cuda_objs/%s/%s.o" % (name, base)
        native.genrule(
            name = "%s_%s_nvcc" % (name, base),
            srcs = [src] + hdrs + native.glob(["**/*.h", "**/*.cuh"]),
            outs = [obj],
            cmd = ("%s -std=c++17 -O3 --expt-relaxed-constexpr -Xcompiler -fPIC " % NVCC) +
                  "%s -I. -I$(GENDIR) %s -c $(location %s) -o $@" % (_GENCODE, " ".join(copts), src),
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart", "@local_cuda//:headers"],
        linkstatic = True,
        **kwargs
    )
