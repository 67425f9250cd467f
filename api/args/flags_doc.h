// api/args/flags_doc.h: renders docs/FLAGS.md from the flag table (flag_table.h).
#ifndef MXMACA_API_ARGS_FLAGS_DOC_H_
#define MXMACA_API_ARGS_FLAGS_DOC_H_

#include <string>

namespace mxmaca::api {

// RenderFlagsMarkdown: the full text of docs/FLAGS.md: a summary of counts per
// classification, then one Markdown table per Megatron argument group (and one for
// MXMACA's own flags) with every flag's option strings, action, nargs, type,
// Megatron's default, choices, MXMACA's classification and the reason/note.
// Deterministic: the same table gives the same bytes.
std::string RenderFlagsMarkdown();

// RenderTrainUsage: `mxmaca train --help` text: the syntax, then every flag MXMACA
// honours (Megatron's kImplemented flags and MXMACA's own) by group with its value
// type and default, and a pointer to docs/FLAGS.md for the rest.
std::string RenderTrainUsage();

}  // namespace mxmaca::api

#endif  // MXMACA_API_ARGS_FLAGS_DOC_H_
