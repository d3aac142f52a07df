# SPDX-License-Identifier: Apache-2.0
"""What CMake needs to build gradsync's torch extension against the torch of this
interpreter (python/gradsync/torch/csrc/CMakeLists.txt runs it). Prints KEY=VALUE lines
(lists joined with ","); exits 3 with a sentence when there is no usable torch."""
import glob
import os
import sys
import sysconfig

try:
    import torch
    import torch.utils.cpp_extension as ext
except Exception as e:  # noqa: BLE001 - any import failure means: no torch here
    print("gradsync: %s cannot import torch (%s)" % (sys.executable, e), file=sys.stderr)
    sys.exit(3)

version = torch.__version__.split("+")[0]
major = int(version.split(".")[0])
if major < 2:
    print("gradsync: torch %s at %s is too old: the C++ backend needs torch 2.x (tested with "
          "2.15)" % (version, os.path.dirname(torch.__file__)), file=sys.stderr)
    sys.exit(3)


def first(patterns):
    for p in patterns:
        hits = sorted(glob.glob(p))
        if hits:
            return hits[0]
    return ""


site = os.path.dirname(os.path.dirname(torch.__file__))
cuda_home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
cuda_inc = cuda_lib = ""
if torch.version.cuda:
    hdr = first([os.path.join(site, "nvidia", "cu*", "include", "cuda_runtime_api.h"),
                 os.path.join(site, "nvidia", "cuda_runtime", "include", "cuda_runtime_api.h"),
                 os.path.join(cuda_home, "include", "cuda_runtime_api.h")])
    lib = first([os.path.join(site, "nvidia", "cu*", "lib", "libcudart.so*"),
                 os.path.join(site, "nvidia", "cuda_runtime", "lib", "libcudart.so*"),
                 os.path.join(cuda_home, "lib64", "libcudart.so*")])
    if hdr and lib:
        cuda_inc, cuda_lib = os.path.dirname(hdr), lib

print("TORCH_VERSION=" + version)
print("TORCH_INCLUDES=" + ",".join(ext.include_paths()))
print("TORCH_LIBDIRS=" + ",".join(ext.library_paths()))
print("TORCH_CXX11_ABI=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI))
print("PYTHON_INCLUDE=" + sysconfig.get_paths()["include"])
print("EXT_SUFFIX=" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
print("TORCH_CUDA=" + (torch.version.cuda or ""))
print("CUDA_INCLUDE=" + cuda_inc)
print("CUDA_LIBRARY=" + cuda_lib)
