"""cuda_configure: finds the CUDA toolkit (CUDA_PATH, default /usr/local/cuda).

If `bin/nvcc` exists, the generated repository links `include/` and `lib64/` and
defines cc_library targets `cudart`, `cublas`, `cublaslt`, `nccl`, `cudnn` (with an
rpath), a `headers` target, and `defs.bzl` with HAS_CUDA = True and NVCC = path.
Without nvcc every target is empty and HAS_CUDA = False, so the CPU-only build still
works (`--repo_env=CUDA_PATH=/nonexistent` tests that).
"""

_LIBS = {
    "cudart": "cudart",
    "cublas": "cublas",
    "cublaslt": "cublasLt",
    "nccl": "nccl",
    "cudnn": "cudnn",
}

def _impl(ctx):
    cuda_path = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    nvcc = ctx.path(cuda_path + "/bin/nvcc")
    has_cuda = nvcc.exists
    build = ['package(default_visibility = ["//visibility:public"])', ""]
    if has_cuda:
        ctx.symlink(cuda_path + "/include", "include")
        ctx.symlink(cuda_path + "/lib64", "lib64")
        build.append('cc_library(name = "headers", hdrs = glob(["include/**"]), includes = ["include"])')
        for name, lib in _LIBS.items():
            build.append(
                'cc_library(name = "%s", deps = [":headers"], linkopts = ["-L%s/lib64", "-Wl,-rpath,%s/lib64", "-l%s"])' %
                (name, cuda_path, cuda_path, lib),
            )
    else:
        build.append('cc_library(name = "headers")')
        for name in _LIBS:
            build.append('cc_library(name = "%s")' % name)
    ctx.file("BUILD", "\n".join(build) + "\n")
    ctx.file("defs.bzl", "HAS_CUDA = %s\nNVCC = %r\nCUDA_PATH = %r\n" % (
        "True" if has_cuda else "False",
        str(nvcc) if has_cuda else "",
        cuda_path,
    ))

cuda_configure = repository_rule(
    implementation = _impl,
    environ = ["CUDA_PATH"],
    local = True,
)
