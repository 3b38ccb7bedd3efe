# Loaders (GGUF, safetensors), tokenizers and chat formats of banyan_model
# (engineer "loaders"); included from model/CMakeLists.txt.
find_package(nlohmann_json REQUIRED)
find_package(ZLIB REQUIRED)

set(BANYAN_MODEL_LOADER_SRCS
  loader.cc
  gguf/mapped_file.cc gguf/ggml_types.cc gguf/gguf_file.cc gguf/gguf_model.cc
  safetensors/safetensors_file.cc safetensors/hf_model.cc
  tokenizer/unicode.cc tokenizer/unicode_tables.cc tokenizer/pretokenizer.cc tokenizer/tokenizer.cc tokenizer/added_tokens.cc
  tokenizer/bpe_tokenizer.cc tokenizer/spm_tokenizer.cc tokenizer/hf_tokenizer_json.cc
  tokenizer/gguf_tokenizer.cc
  chat/chat_format.cc)
target_sources(banyan_model PRIVATE ${BANYAN_MODEL_LOADER_SRCS})
target_link_libraries(banyan_model PUBLIC absl::flat_hash_map absl::span
                                   PRIVATE nlohmann_json::nlohmann_json)

if(BANYAN_BUILD_TESTS OR BANYAN_FUZZ)
  # Test-only helpers: asset reading, tiny model writers, fuzz entry functions.
  add_library(banyan_model_testdata STATIC testdata/test_files.cc testdata/tiny_models.cc
                                           testdata/fuzz_entries.cc)
  target_link_libraries(banyan_model_testdata PUBLIC banyan_base banyan_model absl::statusor absl::strings ZLIB::ZLIB)
  target_include_directories(banyan_model_testdata PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_definitions(banyan_model_testdata PRIVATE BANYAN_ASSETS_DIR="${BANYAN_ASSETS_DIR}"
                                                           BANYAN_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  banyan_apply_common(banyan_model_testdata)
endif()

if(BANYAN_BUILD_TESTS)
  banyan_test(tokenizer_test
    SRCS tokenizer/tokenizer_golden_test.cc tokenizer/tokenizer_hf_agreement_test.cc
         tokenizer/tokenizer_unit_test.cc tokenizer/tokenizer_byte_fallback_test.cc
    DEPS banyan_model banyan_model_testdata nlohmann_json::nlohmann_json)
  banyan_test(loader_test
    SRCS loader_test.cc config_parse_test.cc gguf/ggml_types_test.cc chat/chat_format_test.cc
    DEPS banyan_model banyan_model_testdata nlohmann_json::nlohmann_json)
  banyan_test(model_fuzz_replay_test SRCS fuzz_replay_test.cc DEPS banyan_model_testdata)
endif()

# libFuzzer targets (clang): -DBANYAN_FUZZ=ON. The code under test gets coverage
# instrumentation (fuzzer-no-link) and ASan/UBSan.
if(BANYAN_FUZZ)
  foreach(lib banyan_model banyan_model_testdata)
    target_compile_options(${lib} PRIVATE -fsanitize=fuzzer-no-link,address,undefined)
  endforeach()
  foreach(fuzzer gguf safetensors tokenizer)
    add_executable(model_${fuzzer}_fuzz testdata/fuzz_${fuzzer}.cc)
    banyan_apply_common(model_${fuzzer}_fuzz)
    target_compile_options(model_${fuzzer}_fuzz PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_options(model_${fuzzer}_fuzz PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(model_${fuzzer}_fuzz PRIVATE banyan_model_testdata)
  endforeach()
endif()
