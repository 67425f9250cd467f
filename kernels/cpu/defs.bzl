"""kernel_test: a Catch2 kernel test split into a unit target and a parity target.

The same binary source gives two targets so that CI can select by tag:
  <name>          runs every TEST_CASE except those tagged [parity] (untagged target);
  <name>_parity   runs only the [parity] cases (PyTorch via /usr/bin/python3), with
                  tags = ["parity"].
"""

def kernel_test(name, srcs, deps, parity = True):
    native.cc_test(
        name = name,
        srcs = srcs,
        args = ["~[parity]"],
        deps = deps + ["//third_party:catch2_main"],
    )
    if parity:
        native.cc_test(
            name = name + "_parity",
            srcs = srcs,
            args = ["[parity]"],
            tags = ["parity"],
            deps = deps + ["//third_party:catch2_main"],
        )
