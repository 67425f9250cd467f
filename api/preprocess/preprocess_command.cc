// api/preprocess/preprocess_command.cc: parallel, order-preserving JSONL -> indexed
// dataset pipeline (Megatron tools/preprocess_data.py, Partition.process_json_file).
#include "api/preprocess/preprocess_command.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "api/preprocess/preprocess_partitions.h"
#include "base/status_macros.h"
#include "data/indexed_dataset.h"
#include "data/jsonl_reader.h"
#include "data/tokenizer_factory.h"

namespace mxmaca::api {
namespace {

using Clock = std::chrono::steady_clock;

// Input bytes after which a batch is closed even if it has fewer than docs_per_batch
// documents: bounds the memory in flight to about 4 x workers x 1 MiB of text (plus
// its tokens) whatever the document sizes.
constexpr int64_t kBatchBytes = 1 << 20;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Batch: consecutive input lines and, once a worker is done, their encoded documents.
struct Batch {
  int64_t first_line = 0;              // 1-based line number of lines[0]
  std::vector<std::string> lines;
  std::vector<int64_t> line_bytes;     // input bytes of each line, newline included
  // Per --json-keys entry: the tokens of all documents back to back, each sequence's
  // length, and each document's number of sequences.
  struct KeyOutput {
    std::vector<int32_t> tokens;
    std::vector<int32_t> lengths;
    std::vector<int32_t> sequences_per_doc;
  };
  std::vector<KeyOutput> outputs;
  absl::Status status;
  bool done = false;  // guarded by WorkQueue::mu_
};

// Encodes every line of `batch` (Megatron's Encoder.encode).
void EncodeBatch(const PreprocessOptions& options, const data::Tokenizer& tokenizer,
                 Batch* batch) {
  const size_t num_keys = options.json_keys.size();
  batch->outputs.assign(num_keys, {});
  for (auto& out : batch->outputs) out.sequences_per_doc.reserve(batch->lines.size());
  data::JsonlDocument doc;
  for (size_t i = 0; i < batch->lines.size(); ++i) {
    const int64_t line_number = batch->first_line + static_cast<int64_t>(i);
    absl::Status status =
        data::ParseJsonlLine(batch->lines[i], options.json_keys, options.input, line_number, &doc);
    if (!status.ok()) {
      batch->status = std::move(status);
      return;
    }
    for (size_t k = 0; k < num_keys; ++k) {
      Batch::KeyOutput& out = batch->outputs[k];
      int32_t sequences = 0;
      for (const std::string& sentence : doc.fields[k]) {
        const size_t before = out.tokens.size();
        tokenizer.EncodeAppend(sentence, &out.tokens);
        const size_t count = out.tokens.size() - before;
        if (count == 0) continue;  // Megatron: `if len(sentence_ids) > 0`
        if (count >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
          batch->status = absl::InvalidArgumentError(absl::StrCat(
              options.input, ":", line_number, ": a sentence of key \"",
              options.json_keys[k], "\" has ", count,
              " tokens, more than an int32 sequence length holds"));
          return;
        }
        out.lengths.push_back(static_cast<int32_t>(count));
        ++sequences;
      }
      if (sequences > 0 && options.append_eod) {
        out.tokens.push_back(tokenizer.eod());
        ++out.lengths.back();
      }
      out.sequences_per_doc.push_back(sequences);
    }
    std::string().swap(batch->lines[i]);  // the text is no longer needed
  }
}

// WorkQueue: batches waiting for a worker thread, and completion signalling.
class WorkQueue {
 public:
  void Push(Batch* batch) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.push_back(batch);
    }
    work_cv_.notify_one();
  }
  // Pop: the next batch, or nullptr once Close() was called and nothing is pending.
  Batch* Pop() {
    std::unique_lock<std::mutex> lock(mu_);
    work_cv_.wait(lock, [this] { return closed_ || !pending_.empty(); });
    if (pending_.empty()) return nullptr;
    Batch* batch = pending_.front();
    pending_.pop_front();
    return batch;
  }
  void MarkDone(Batch* batch) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      batch->done = true;
    }
    done_cv_.notify_all();
  }
  void WaitDone(Batch* batch) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [batch] { return batch->done; });
  }
  // Close: no more batches; with `drop_pending` the unstarted ones are discarded.
  void Close(bool drop_pending) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      if (drop_pending) pending_.clear();
    }
    work_cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::deque<Batch*> pending_;
  bool closed_ = false;
};

// WorkerPool: `n` threads running EncodeBatch on queued batches; joined on destruction
// (after dropping the batches not yet started).
class WorkerPool {
 public:
  WorkerPool(int64_t n, const PreprocessOptions& options,
             const data::Tokenizer& tokenizer) {
    for (int64_t i = 0; i < n; ++i) {
      threads_.emplace_back([this, &options, &tokenizer] {
        while (Batch* batch = queue_.Pop()) {
          EncodeBatch(options, tokenizer, batch);
          queue_.MarkDone(batch);
        }
      });
    }
  }
  ~WorkerPool() {
    queue_.Close(/*drop_pending=*/true);
    for (std::thread& t : threads_) t.join();
  }
  WorkQueue& queue() { return queue_; }

 private:
  WorkQueue queue_;
  std::vector<std::thread> threads_;
};

// Progress: Megatron's print_processing_stats plus a token count.
class Progress {
 public:
  Progress(std::FILE* log, int64_t interval) : log_(log), interval_(interval) {}
  void Start() { start_ = Clock::now(); }
  void Document(int64_t bytes, int64_t tokens) {
    ++documents_;
    bytes_ += bytes;
    tokens_ += tokens;
    if (log_ != nullptr && documents_ % interval_ == 0) {
      const double elapsed = std::max(SecondsSince(start_), 1e-9);
      std::fprintf(log_, "Processed %lld documents (%.1f docs/s, %.2f MB/s, %lld tokens).\n",
                   static_cast<long long>(documents_), documents_ / elapsed,
                   bytes_ / elapsed / 1024.0 / 1024.0, static_cast<long long>(tokens_));
      std::fflush(log_);
    }
  }
  int64_t documents() const { return documents_; }
  int64_t bytes() const { return bytes_; }
  int64_t tokens() const { return tokens_; }
  double seconds() const { return SecondsSince(start_); }

 private:
  std::FILE* log_;
  int64_t interval_;
  Clock::time_point start_;
  int64_t documents_ = 0;
  int64_t bytes_ = 0;
  int64_t tokens_ = 0;
};

// Appends the documents of a finished batch to the builders, in order.
absl::Status WriteBatch(const Batch& batch,
                        std::vector<std::unique_ptr<data::IndexedDatasetBuilder>>& builders,
                        Progress& progress) {
  MXMACA_RETURN_IF_ERROR(batch.status);
  const size_t num_keys = builders.size();
  std::vector<size_t> token_pos(num_keys, 0), length_pos(num_keys, 0);
  for (size_t d = 0; d < batch.line_bytes.size(); ++d) {
    int64_t doc_tokens = 0;
    for (size_t k = 0; k < num_keys; ++k) {
      const Batch::KeyOutput& out = batch.outputs[k];
      const size_t sequences = static_cast<size_t>(out.sequences_per_doc[d]);
      auto lengths = absl::MakeConstSpan(out.lengths).subspan(length_pos[k], sequences);
      size_t count = 0;
      for (int32_t length : lengths) count += static_cast<size_t>(length);
      auto tokens = absl::MakeConstSpan(out.tokens).subspan(token_pos[k], count);
      MXMACA_RETURN_IF_ERROR(builders[k]->AddDocument(tokens, lengths));
      token_pos[k] += count;
      length_pos[k] += sequences;
      doc_tokens += static_cast<int64_t>(count);
    }
    progress.Document(batch.line_bytes[d], doc_tokens);
  }
  return absl::OkStatus();
}

}  // namespace

std::string OutputPrefix(const std::string& output_prefix, const std::string& key) {
  return absl::StrCat(output_prefix, "_", key, "_document");
}

absl::StatusOr<std::unique_ptr<data::Tokenizer>> BuildPreprocessTokenizer(
    const PreprocessOptions& options) {
  data::TokenizerSpec spec;
  spec.tokenizer_type = options.tokenizer_type;
  if (!options.vocab_file.empty()) spec.vocab_file = options.vocab_file;
  if (!options.merge_file.empty()) spec.merge_file = options.merge_file;
  if (!options.tokenizer_model.empty()) spec.tokenizer_model = options.tokenizer_model;
  if (!options.tiktoken_pattern.empty()) spec.tiktoken_pattern = options.tiktoken_pattern;
  spec.vocab_size = options.vocab_size;
  spec.vocab_extra_ids = options.vocab_extra_ids;
  spec.tiktoken_num_special_tokens = options.tiktoken_num_special_tokens;
  spec.tiktoken_special_tokens = options.tiktoken_special_tokens;
  spec.legacy_tokenizer = options.legacy_tokenizer;
  MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<data::Tokenizer> tokenizer, data::BuildTokenizer(spec));
  if (options.append_eod && tokenizer->eod() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "preprocess: --append-eod, but the ", options.tokenizer_type, " tokenizer ",
        options.tokenizer_model,
        " has no end-of-document token (HuggingFaceTokenizer: no eos_token in "
        "tokenizer_config.json or special_tokens_map.json)"));
  }
  return tokenizer;
}

absl::Status Preprocess(const PreprocessOptions& options, std::FILE* log,
                        PreprocessStats* stats) {
  if (options.partitions > 1) return PreprocessPartitions(options, log, stats);
  const Clock::time_point startup = Clock::now();
  MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<data::Tokenizer> tokenizer,
                          BuildPreprocessTokenizer(options));
  return PreprocessFile(options, *tokenizer, log, stats, SecondsSince(startup));
}

absl::Status PreprocessFile(const PreprocessOptions& options, const data::Tokenizer& tokenizer,
                            std::FILE* log, PreprocessStats* stats, double startup_seconds) {
  const Clock::time_point startup = Clock::now();
  if (log != nullptr) std::fprintf(log, "Opening %s\n", options.input.c_str());
  MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<data::JsonlLineReader> reader,
                          data::JsonlLineReader::Open(options.input));
  const data::DType dtype = data::DTypeForVocab(tokenizer.vocab_size());
  std::vector<std::unique_ptr<data::IndexedDatasetBuilder>> builders;
  for (const std::string& key : options.json_keys) {
    MXMACA_ASSIGN_OR_RETURN(
        std::unique_ptr<data::IndexedDatasetBuilder> builder,
        data::IndexedDatasetBuilder::Create(OutputPrefix(options.output_prefix, key), dtype));
    builders.push_back(std::move(builder));
  }
  if (log != nullptr) {
    std::fprintf(log, "Time to startup: %.3f s (vocab %lld, dtype %s, %lld workers)\n",
                 startup_seconds + SecondsSince(startup),
                 static_cast<long long>(tokenizer.vocab_size()),
                 data::DTypeName(dtype), static_cast<long long>(options.workers));
  }

  Progress progress(log, options.log_interval);
  progress.Start();
  const size_t max_in_flight = static_cast<size_t>(
      options.max_batches_in_flight > 0 ? options.max_batches_in_flight : 4 * options.workers);
  const size_t docs_per_batch = static_cast<size_t>(std::max<int64_t>(1, options.docs_per_batch));
  // Declared before the pool: the pool's threads reference these batches, and the
  // pool is destroyed (threads joined) first.
  std::deque<std::unique_ptr<Batch>> in_flight;
  absl::Status status;
  {
    WorkerPool pool(options.workers, options, tokenizer);
    bool end_of_input = false;
    while (status.ok() && !end_of_input) {
      auto batch = std::make_unique<Batch>();
      batch->first_line = reader->line_number() + 1;
      int64_t batch_bytes = 0;  // a batch also ends after kBatchBytes of input
      while (batch->lines.size() < docs_per_batch && batch_bytes < kBatchBytes) {
        std::string line;
        const int64_t before = reader->bytes_consumed();
        absl::StatusOr<bool> more = reader->Next(&line);
        if (!more.ok()) {
          status = more.status();
          break;
        }
        if (!*more) {
          end_of_input = true;
          break;
        }
        batch->lines.push_back(std::move(line));
        batch->line_bytes.push_back(reader->bytes_consumed() - before);
        batch_bytes += batch->line_bytes.back();
      }
      if (!status.ok() || batch->lines.empty()) break;
      pool.queue().Push(batch.get());
      in_flight.push_back(std::move(batch));
      while (status.ok() && (in_flight.size() >= max_in_flight ||
                             (end_of_input && !in_flight.empty()))) {
        pool.queue().WaitDone(in_flight.front().get());
        status = WriteBatch(*in_flight.front(), builders, progress);
        in_flight.pop_front();
      }
    }
    while (status.ok() && !in_flight.empty()) {  // only after an empty final batch
      pool.queue().WaitDone(in_flight.front().get());
      status = WriteBatch(*in_flight.front(), builders, progress);
      in_flight.pop_front();
    }
  }  // workers joined here, also on error
  MXMACA_RETURN_IF_ERROR(status);
  for (auto& builder : builders) MXMACA_RETURN_IF_ERROR(builder->Finalize());

  const double seconds = progress.seconds();
  if (log != nullptr) {
    const double s = std::max(seconds, 1e-9);
    std::fprintf(log,
                 "Done: %lld documents, %lld tokens, %.2f MB in %.3f s (%.1f docs/s, "
                 "%.2f MB/s, %.0f tokens/s); wrote ",
                 static_cast<long long>(progress.documents()),
                 static_cast<long long>(progress.tokens()), progress.bytes() / 1048576.0,
                 seconds, progress.documents() / s, progress.bytes() / s / 1048576.0,
                 progress.tokens() / s);
    for (size_t k = 0; k < options.json_keys.size(); ++k) {
      std::fprintf(log, "%s%s_document.{bin,idx}", k == 0 ? "" : ", ",
                   (options.output_prefix + "_" + options.json_keys[k]).c_str());
    }
    std::fprintf(log, "\n");
    std::fflush(log);
  }
  if (stats != nullptr) {
    stats->documents = progress.documents();
    stats->tokens = progress.tokens();
    stats->input_bytes = progress.bytes();
    stats->seconds = seconds;
  }
  return absl::OkStatus();
}

absl::Status RunPreprocess(const std::vector<std::string>& args) {
  MXMACA_ASSIGN_OR_RETURN(PreprocessOptions options, ParsePreprocessArgs(args));
  if (options.help) {
    std::fputs(PreprocessUsage().c_str(), stdout);
    return absl::OkStatus();
  }
  return Preprocess(options, stderr);
}

}  // namespace mxmaca::api
