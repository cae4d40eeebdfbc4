// deepinfer._deepinfer: the C++ LLM, SamplingParams and RequestOutput for Python. The public
// package (python/deepinfer) re-exports these under vLLM-style names and module paths.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/status.h"
#include "deepinfer/llm.h"
#include "engine/engine.h"

namespace py = pybind11;
using namespace deepinfer;

namespace {

// Python's exception types for deepinfer's error codes.
void translate(const Error& e) {
  switch (e.code()) {
    case ErrorCode::kInvalidArgument:
      PyErr_SetString(PyExc_ValueError, e.what());
      return;
    case ErrorCode::kNotFound:
      PyErr_SetString(PyExc_FileNotFoundError, e.what());
      return;
    case ErrorCode::kUnsupported:
      PyErr_SetString(PyExc_NotImplementedError, e.what());
      return;
    case ErrorCode::kOutOfMemory:
      PyErr_SetString(PyExc_MemoryError, e.what());
      return;
    default:
      PyErr_SetString(PyExc_RuntimeError, e.what());
  }
}

py::object stop_reason(const CompletionOutput& c) {
  if (const auto* s = std::get_if<std::string>(&c.stop_reason)) return py::str(*s);
  if (const auto* t = std::get_if<int32_t>(&c.stop_reason)) return py::int_(*t);
  return py::none();
}

SamplingParams make_params(int n, float temperature, float top_p, int top_k, float min_p,
                           std::optional<uint64_t> seq_seed, float presence_penalty,
                           float frequency_penalty, float repetition_penalty,
                           std::optional<std::map<int32_t, float>> logit_bias, int min_tokens,
                           std::optional<int> max_tokens, py::object stop,
                           std::optional<std::vector<int32_t>> stop_token_ids, bool ignore_eos,
                           bool include_stop_str_in_output, std::optional<int> logprobs,
                           bool skip_special_tokens) {
  SamplingParams p;
  p.n = n;
  p.temperature = temperature;
  p.top_p = top_p;
  p.top_k = top_k;
  p.min_p = min_p;
  p.seq_seed = seq_seed;
  p.presence_penalty = presence_penalty;
  p.frequency_penalty = frequency_penalty;
  p.repetition_penalty = repetition_penalty;
  if (logit_bias) p.logit_bias = *logit_bias;
  p.min_tokens = min_tokens;
  p.max_tokens = max_tokens;
  if (py::isinstance<py::str>(stop))
    p.stop = {stop.cast<std::string>()};
  else if (!stop.is_none())
    p.stop = stop.cast<std::vector<std::string>>();
  if (stop_token_ids) p.stop_token_ids = *stop_token_ids;
  p.ignore_eos = ignore_eos;
  p.include_stop_str_in_output = include_stop_str_in_output;
  p.logprobs = logprobs;
  p.skip_special_tokens = skip_special_tokens;
  p.validate();
  return p;
}

EngineType engine_type_from(const std::string& s) {
  if (s == "normal" || s == "NORMAL") return EngineType::kNormal;
  if (s == "prompt" || s == "PROMPT") return EngineType::kPrompt;
  if (s == "completion" || s == "COMPLETION") return EngineType::kCompletion;
  fail(ErrorCode::kInvalidArgument, "engine_type '{}' is not one of normal, prompt, completion", s);
}

std::vector<Prompt> to_prompts(const py::object& prompts) {
  std::vector<Prompt> out;
  auto one = [&](const py::handle& h, size_t i) {
    if (py::isinstance<py::str>(h)) {
      out.emplace_back(h.cast<std::string>());
    } else if (py::isinstance<py::dict>(h)) {
      py::dict d = h.cast<py::dict>();
      if (d.contains("prompt_token_ids"))
        out.emplace_back(d["prompt_token_ids"].cast<std::vector<int32_t>>());
      else if (d.contains("prompt"))
        out.emplace_back(d["prompt"].cast<std::string>());
      else
        fail(ErrorCode::kInvalidArgument,
             "prompts[{}]: a dict prompt needs 'prompt' or 'prompt_token_ids'", i);
    } else if (py::isinstance<py::sequence>(h)) {
      out.emplace_back(h.cast<std::vector<int32_t>>());
    } else {
      fail(ErrorCode::kInvalidArgument,
           "prompts[{}]: expected a str, a list of token ids or a dict", i);
    }
  };
  if (py::isinstance<py::str>(prompts) || py::isinstance<py::dict>(prompts)) {
    one(prompts, 0);
    return out;
  }
  // A list of ints is one tokenized prompt; a list of anything else is many prompts.
  py::sequence seq = prompts.cast<py::sequence>();
  if (py::len(seq) > 0 && py::isinstance<py::int_>(seq[0])) {
    one(prompts, 0);
    return out;
  }
  for (size_t i = 0; i < py::len(seq); ++i) one(seq[i], i);
  return out;
}

std::vector<SamplingParams> to_params(const py::object& params) {
  if (params.is_none()) return {SamplingParams()};
  if (py::isinstance<SamplingParams>(params)) return {params.cast<SamplingParams>()};
  return params.cast<std::vector<SamplingParams>>();
}

std::vector<std::vector<ChatMessage>> to_conversations(const py::object& messages) {
  auto conv = [](const py::handle& list) {
    std::vector<ChatMessage> out;
    size_t i = 0;
    for (const auto& m : list.cast<py::sequence>()) {
      py::dict d = m.cast<py::dict>();
      if (!d.contains("role") || !d.contains("content"))
        fail(ErrorCode::kInvalidArgument, "messages[{}] needs 'role' and 'content'", i);
      out.push_back({d["role"].cast<std::string>(), d["content"].cast<std::string>()});
      ++i;
    }
    return out;
  };
  py::sequence seq = messages.cast<py::sequence>();
  if (py::len(seq) > 0 && py::isinstance<py::dict>(seq[0])) return {conv(messages)};
  std::vector<std::vector<ChatMessage>> all;
  for (const auto& c : seq) all.push_back(conv(c));
  return all;
}

}  // namespace

PYBIND11_MODULE(_deepinfer, m) {
  m.doc() = "deepinfer: inference engine for the DeepSeek-V4 model family";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      translate(e);
    }
  });

  py::class_<SamplingParams>(m, "SamplingParams")
      .def(py::init(&make_params), py::kw_only(), py::arg("n") = 1, py::arg("temperature") = 1.0f,
           py::arg("top_p") = 1.0f, py::arg("top_k") = 0, py::arg("min_p") = 0.0f,
           py::arg("seq_seed") = py::none(), py::arg("presence_penalty") = 0.0f,
           py::arg("frequency_penalty") = 0.0f, py::arg("repetition_penalty") = 1.0f,
           py::arg("logit_bias") = py::none(), py::arg("min_tokens") = 0,
           py::arg("max_tokens") = 16, py::arg("stop") = py::none(),
           py::arg("stop_token_ids") = py::none(), py::arg("ignore_eos") = false,
           py::arg("include_stop_str_in_output") = false, py::arg("logprobs") = py::none(),
           py::arg("skip_special_tokens") = true)
      .def_readonly("n", &SamplingParams::n)
      .def_readonly("temperature", &SamplingParams::temperature)
      .def_readonly("top_p", &SamplingParams::top_p)
      .def_readonly("top_k", &SamplingParams::top_k)
      .def_readonly("min_p", &SamplingParams::min_p)
      .def_readonly("seq_seed", &SamplingParams::seq_seed)
      .def_readonly("presence_penalty", &SamplingParams::presence_penalty)
      .def_readonly("frequency_penalty", &SamplingParams::frequency_penalty)
      .def_readonly("repetition_penalty", &SamplingParams::repetition_penalty)
      .def_readonly("logit_bias", &SamplingParams::logit_bias)
      .def_readonly("min_tokens", &SamplingParams::min_tokens)
      .def_readonly("max_tokens", &SamplingParams::max_tokens)
      .def_readonly("stop", &SamplingParams::stop)
      .def_readonly("stop_token_ids", &SamplingParams::stop_token_ids)
      .def_readonly("ignore_eos", &SamplingParams::ignore_eos)
      .def_readonly("include_stop_str_in_output", &SamplingParams::include_stop_str_in_output)
      .def_readonly("logprobs", &SamplingParams::logprobs)
      .def_readonly("skip_special_tokens", &SamplingParams::skip_special_tokens)
      .def("__repr__", [](const SamplingParams& p) {
        return fmt::format(
            "SamplingParams(temperature={}, top_p={}, top_k={}, min_p={}, "
            "max_tokens={}, seq_seed={})",
            p.temperature, p.top_p, p.top_k, p.min_p,
            p.max_tokens ? std::to_string(*p.max_tokens) : "None",
            p.seq_seed ? std::to_string(*p.seq_seed) : "None");
      });

  py::class_<Logprob>(m, "Logprob")
      .def_readonly("logprob", &Logprob::logprob)
      .def_readonly("rank", &Logprob::rank)
      .def_readonly("decoded_token", &Logprob::decoded_token)
      .def("__repr__", [](const Logprob& l) {
        return fmt::format("Logprob(logprob={}, rank={}, decoded_token={:?})", l.logprob, l.rank,
                           l.decoded_token);
      });

  py::class_<CompletionOutput>(m, "CompletionOutput")
      .def_readonly("index", &CompletionOutput::index)
      .def_readonly("text", &CompletionOutput::text)
      .def_readonly("token_ids", &CompletionOutput::token_ids)
      .def_readonly("cumulative_logprob", &CompletionOutput::cumulative_logprob)
      .def_readonly("logprobs", &CompletionOutput::logprobs)
      .def_readonly("finish_reason", &CompletionOutput::finish_reason)
      .def_property_readonly("stop_reason", &stop_reason)
      .def("__repr__", [](const CompletionOutput& c) {
        return fmt::format(
            "CompletionOutput(index={}, text={:?}, token_ids=[{} ids], "
            "finish_reason={})",
            c.index, c.text, c.token_ids.size(), c.finish_reason.value_or("None"));
      });

  py::class_<RequestMetrics>(m, "RequestMetrics")
      .def_readonly("arrival_time", &RequestMetrics::arrival_time)
      .def_readonly("first_scheduled_time", &RequestMetrics::first_scheduled_time)
      .def_readonly("first_token_time", &RequestMetrics::first_token_time)
      .def_readonly("finished_time", &RequestMetrics::finished_time);

  py::class_<RequestOutput>(m, "RequestOutput")
      .def_readonly("request_id", &RequestOutput::request_id)
      .def_readonly("prompt", &RequestOutput::prompt)
      .def_readonly("prompt_token_ids", &RequestOutput::prompt_token_ids)
      .def_readonly("outputs", &RequestOutput::outputs)
      .def_readonly("finished", &RequestOutput::finished)
      .def_readonly("metrics", &RequestOutput::metrics)
      .def("__repr__", [](const RequestOutput& o) {
        return fmt::format(
            "RequestOutput(request_id={:?}, prompt={:?}, finished={}, "
            "outputs=[{} completion])",
            o.request_id, o.prompt, o.finished, o.outputs.size());
      });

  py::class_<LLM>(m, "LLM")
      .def(py::init([](std::optional<std::string> model, std::optional<std::string> tokenizer,
                       int expert_parallel_size, int data_parallel_size,
                       double gpu_memory_utilization, int max_num_seqs, int64_t max_prefill_tokens,
                       int64_t max_model_len, int64_t max_state_bytes, std::string device,
                       std::string engine_type, bool show_progress) {
             EngineConfig c;
             c.model = model.value_or("");
             c.tokenizer = tokenizer.value_or("");
             c.expert_parallel_size = expert_parallel_size;
             c.data_parallel_size = data_parallel_size;
             c.gpu_memory_utilization = gpu_memory_utilization;
             c.max_num_seqs = max_num_seqs;
             c.max_prefill_tokens = max_prefill_tokens;
             c.max_model_len = max_model_len;
             c.max_state_bytes = max_state_bytes;
             c.device = device;
             c.engine_type = engine_type_from(engine_type);
             c.show_progress = show_progress;
             py::gil_scoped_release release;
             return std::make_unique<LLM>(c);
           }),
           py::arg("model") = py::none(), py::kw_only(), py::arg("tokenizer") = py::none(),
           py::arg("expert_parallel_size") = 1, py::arg("data_parallel_size") = 1,
           py::arg("gpu_memory_utilization") = 0.9, py::arg("max_num_seqs") = 256,
           py::arg("max_prefill_tokens") = 8192, py::arg("max_model_len") = 0,
           py::arg("max_state_bytes") = 0, py::arg("device") = "cpu",
           py::arg("engine_type") = "normal", py::arg("show_progress") = true)
      .def(
          "generate",
          [](LLM& llm, const py::object& prompts, const py::object& sampling_params) {
            const auto ps = to_prompts(prompts);
            const auto params = to_params(sampling_params);
            py::gil_scoped_release release;
            return llm.generate(ps, params);
          },
          py::arg("prompts"), py::arg("sampling_params") = py::none())
      .def(
          "chat",
          [](LLM& llm, const py::object& messages, const py::object& sampling_params,
             bool enable_thinking) {
            const auto convs = to_conversations(messages);
            const auto params = to_params(sampling_params);
            DI_CHECK(params.size() == 1, ErrorCode::kInvalidArgument,
                     "sampling_params: chat takes one SamplingParams for all conversations");
            py::gil_scoped_release release;
            return llm.chat(convs, params[0], enable_thinking);
          },
          py::arg("messages"), py::arg("sampling_params") = py::none(),
          py::arg("enable_thinking") = false)
      .def(
          "apply_chat_template",
          [](LLM& llm, const py::object& messages, bool enable_thinking) {
            return llm.apply_chat_template(to_conversations(messages).at(0), true, enable_thinking);
          },
          py::arg("messages"), py::arg("enable_thinking") = false)
      .def("get_tokenizer_vocab_size",
           [](LLM& llm) { return llm.engine().model_config().vocab_size; });

  m.def("default_model_dir", &default_model_dir);
}
