"""The host library's scalar overload of `exec_ternary_kernel` (MetalShaderLibrary.h and the .mm
that defines the library's methods), for a checkout whose library takes no scalar (torch 2.13).

Upstream added the overload with its addcmul port; porter writes it the same way from the
checkout's own scalar-free function, so that the copy matches that checkout's version of it:
- the declaration, after the scalar-free one in MetalShaderLibrary.h:
  `void exec_ternary_kernel(TensorIteratorBase& iter, const std::string& name,
  const c10::Scalar& alpha, c10::ScalarType alpha_type);`
- the definition, after the scalar-free one: the same body, with the 32-bit split calling the
  overload itself (2.13's copy calls exec_binary_kernel there), the host names ending in the
  scalar's type (`addcmul_dense_float_float_float`, as REGISTER_OPMATH_TERNARY_ALPHA_OP names
  them), the scalar bound at buffer 4 after the output and three operands, and every argument
  bound after it moved one buffer up (the ternary_alpha kernels of c10/metal/indexing.h read
  sizes from buffer 5).
Where the function is not in the shape these edits know, ValueError says what is missing.
"""

from __future__ import annotations

import re

from porter.source.cpp_scan import code_mask, matching_close

DECL_RE = re.compile(r"^(?P<indent>[ \t]*)void\s+exec_ternary_kernel\s*\(\s*TensorIteratorBase&\s*iter\s*,"
                     r"\s*const\s+std::string&\s*name\s*\)\s*;[ \t]*\n", re.M)
DEF_RE = re.compile(r"^void\s+MetalShaderLibrary::exec_ternary_kernel\s*\(\s*TensorIteratorBase&\s*iter"
                    r"\s*,\s*const\s+std::string&\s*name\s*\)\s*\{", re.M)
SCALAR_PARAMS = "const c10::Scalar& alpha, c10::ScalarType alpha_type"


def declares_scalar_overload(header: str) -> bool:
    return bool(re.search(r"\bvoid\s+exec_ternary_kernel\s*\([^;{]*Scalar[^;{]*\)", header))


def add_declaration(header: str) -> str:
    """MetalShaderLibrary.h with the scalar overload declared after the scalar-free one."""
    if declares_scalar_overload(header):
        return header
    m = DECL_RE.search(header)
    if m is None:
        raise ValueError("no `void exec_ternary_kernel(TensorIteratorBase& iter, const std::string& "
                         "name);` to declare the scalar overload after")
    i = m["indent"]
    decl = (f"{i}void exec_ternary_kernel(\n{i}    TensorIteratorBase& iter,\n"
            f"{i}    const std::string& name,\n{i}    const c10::Scalar& alpha,\n"
            f"{i}    c10::ScalarType alpha_type);\n")
    return header[:m.end()] + decl + header[m.end():]


def defines_scalar_free(text: str) -> bool:
    return bool(DEF_RE.search(text))


def add_definition(text: str) -> str:
    """The .mm with the scalar overload defined after the scalar-free definition."""
    if re.search(r"MetalShaderLibrary::exec_ternary_kernel\s*\([^)]*Scalar", text):
        return text
    m = DEF_RE.search(text)
    if m is None:
        raise ValueError("no definition of MetalShaderLibrary::exec_ternary_kernel(iter, name) to "
                         "write the scalar overload from")
    close = matching_close(code_mask(text), m.end() - 1)
    if close < 0:
        raise ValueError("MetalShaderLibrary::exec_ternary_kernel(iter, name)'s body is unbalanced")
    body = text[m.end():close]
    body, splits = re.subn(r"\bexec_(?:binary|ternary)_kernel\(\s*sub_iter\s*,\s*name\s*\)",
                           "exec_ternary_kernel(sub_iter, name, alpha, alpha_type)", body)
    if splits != 1:
        raise ValueError("exec_ternary_kernel(iter, name) splits a 64-bit iterator in no shape porter "
                         "knows (one call on sub_iter)")
    body, names = re.subn(r'fmt::format\(\s*"(\{\}_\{\}[^"]*)"\s*,([^;]*?)\)(?=\s*[:;])',
                          lambda f: f'fmt::format("{f[1]}_{{}}",{f[2]}, '
                                    'scalarToMetalTypeString(alpha_type))', body)
    if names != 2:
        raise ValueError("exec_ternary_kernel(iter, name) forms its kernel names in no shape porter "
                         "knows (two fmt::format calls, cast and not)")
    bind = re.search(r"^([ \t]*)bind_iter_tensors\(\s*computeEncoder\s*,\s*iter\s*\)\s*;[ \t]*\n", body, re.M)
    if bind is None:
        raise ValueError("exec_ternary_kernel(iter, name) binds its tensors in no shape porter knows "
                         "(bind_iter_tensors(computeEncoder, iter))")
    after = body[bind.end():]
    if re.search(r"mtl_setArgs<(?!4>)\d+>|\bset(?:Bytes|Buffer)\b|\bmtl_set(?:Bytes|Buffer)\b", after):
        raise ValueError("exec_ternary_kernel(iter, name) binds arguments after its tensors other "
                         "than from buffer 4 (mtl_setArgs<4>)")
    after = after.replace("mtl_setArgs<4>(", "mtl_setArgs<5>(")
    body = (body[:bind.end()] + f"{bind[1]}// the scalar, at the type the host names, after the output "
            f"and the three operands\n{bind[1]}mtl_setArgs<4>(computeEncoder, getMPSScalar(alpha, "
            f"alpha_type));\n" + after)
    definition = ("\n\nvoid MetalShaderLibrary::exec_ternary_kernel(TensorIteratorBase& iter,\n"
                  "                                             const std::string& name,\n"
                  "                                             const c10::Scalar& alpha,\n"
                  "                                             c10::ScalarType alpha_type) {"
                  + body + "}")
    return text[:close + 1] + definition + text[close + 1:]
