// data/internal/spm_processor.cc: SpmProcessor over sentencepiece::SentencePieceProcessor.
// Includes no Abseil header (see the .h).
#include "data/internal/spm_processor.h"

#include <sentencepiece_processor.h>

namespace mxmaca::data::internal {

struct SpmProcessor::Impl {
  sentencepiece::SentencePieceProcessor sp;
};

SpmProcessor::SpmProcessor() : impl_(new Impl()) {}
SpmProcessor::~SpmProcessor() = default;

std::unique_ptr<SpmProcessor> SpmProcessor::Load(const std::string& model_file,
                                                 std::string* error) {
  std::unique_ptr<SpmProcessor> p(new SpmProcessor());
  const auto status = p->impl_->sp.Load(model_file);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  if (p->impl_->sp.GetPieceSize() <= 0) {
    *error = "the model has no pieces";
    return nullptr;
  }
  return p;
}

std::vector<int> SpmProcessor::Encode(std::string_view text) const {
  std::vector<int> ids;
  impl_->sp.Encode(text, &ids);  // fails only on an unloaded model
  return ids;
}

bool SpmProcessor::Decode(const std::vector<int>& ids, std::string* text,
                          std::string* error) const {
  const auto status = impl_->sp.Decode(ids, text);
  if (!status.ok()) {
    *error = status.ToString();
    return false;
  }
  return true;
}

int SpmProcessor::piece_size() const { return impl_->sp.GetPieceSize(); }
std::string SpmProcessor::IdToPiece(int id) const { return impl_->sp.IdToPiece(id); }
int SpmProcessor::bos_id() const { return impl_->sp.bos_id(); }
int SpmProcessor::eos_id() const { return impl_->sp.eos_id(); }
int SpmProcessor::pad_id() const { return impl_->sp.pad_id(); }
int SpmProcessor::unk_id() const { return impl_->sp.unk_id(); }

}  // namespace mxmaca::data::internal
