"""The fault classes the fault tests try (promises kept under faults), each with the tests that try it.

A closing note gives the count of fault classes tried (``len(FAULT_CLASSES)``), and the tracebacks,
silent wrong numbers and files lost they found: each test below asserts one clean line (or a clean result) and
no traceback, that a damaged input never yields a different number without a word, and that no output is left
torn; so all three are zero while these tests pass. ``tests/test_fault_catalogue.py`` checks that every test
named here exists, that no two classes share a name, and the count.

A test is named ``tests/FILE.py::TEST``, or ``tests/FILE.py::TEST[ID]`` for one case of a parametrized test
whose ID is a string in that file (a fuzz test's ``kind``, a command's name). One parametrized test may try
several classes (``test_a_bad_input_is_one_line_naming_the_path`` tries a table of them).
"""

from __future__ import annotations

from typing import NamedTuple


class FaultClass(NamedTuple):
    name: str
    description: str
    tests: tuple[str, ...]


BAD = "tests/test_bad_inputs.py::"
SUM = "tests/test_faults_checksum.py::"
RUN = "tests/test_faults_runs.py::"
MSG = "tests/test_faults_messages.py::"
RO = "tests/test_results_readonly.py::"
LOCK = "tests/test_faults_results_lock.py::"
FUZZ = "tests/test_faults_fuzz.py::"
MORE = "tests/test_faults_more.py::"
CONFIG = "tests/test_config.py::"
TRAIN = "tests/test_train.py::"
BLAME = "tests/test_part_blame.py::"
HOLES = "tests/test_faults_holes.py::"

_BAD_TABLE = BAD + "test_a_bad_input_is_one_line_naming_the_path"
_EXPORT = FUZZ + "test_a_damaged_export_is_refused_in_one_line"
_PAYLOAD = FUZZ + "test_a_checkpoint_with_a_changed_payload_is_refused_in_one_line"
_RECORDS = FUZZ + "test_a_checkpoint_with_changed_records_is_refused_in_one_line"
_DISK = MORE + "test_a_full_disk_names_the_file_and_leaves_no_torn_one"
_AUTOGRAD = BLAME + "test_a_part_that_breaks_autograd_is_refused_before_training"
_RAISES = BLAME + "test_an_exception_in_a_part_is_named_as_the_students_with_its_line"
_GLOBAL = BLAME + "test_a_part_changing_torch_global_settings_is_refused_and_undone"
_RANGE = (CONFIG + "test_a_setting_out_of_its_range_is_refused_naming_the_range",
          CONFIG + "test_set_out_of_range_is_one_line_naming_the_flag_and_the_range")


def _fault(name: str, description: str, *tests: str) -> FaultClass:
    return FaultClass(name, description, tests)


FAULT_CLASSES: list[FaultClass] = [
    # --------------------------------------------------------------- input files
    _fault("missing file", "a path that does not exist, for every command's inputs", _BAD_TABLE),
    _fault("empty file", "a file of no bytes as a checkpoint, cipher input or predictions", _BAD_TABLE,
           BAD + "test_decrypt_reads_a_notepad_file_and_refuses_an_empty_one"),
    _fault("folder for a file", "a folder where a file is expected", _BAD_TABLE),
    _fault("not UTF-8", "Latin-1 bytes in a text input or a data file", _BAD_TABLE),
    _fault("NUL bytes", "control bytes (NUL) in a predictions file", _BAD_TABLE),
    _fault("wrong kind of file", "JSON or text given as a checkpoint, a notebook or a model export", _BAD_TABLE),
    _fault("empty data file", "a data folder whose plaintext file is empty", _BAD_TABLE),
    _fault("cipher file of other text", "a data folder whose cipher file is not its plaintext's", _BAD_TABLE),
    _fault("data file is a folder", "brown_plain.txt is a folder", _BAD_TABLE),
    _fault("random bytes as data", "Hypothesis bytes as a data file", BAD + "test_random_bytes_as_a_data_file"),
    _fault("random bytes as predictions", "Hypothesis bytes as a predictions file",
           BAD + "test_random_bytes_as_a_predictions_file"),
    _fault("random bytes as a checkpoint", "Hypothesis bytes as best.pt or .safetensors",
           BAD + "test_random_bytes_as_a_checkpoint"),
    _fault("byte-order mark and CRLF", "a file saved by Windows Notepad", BAD + "test_score_strips_a_byte_order_mark_and_says_so",
           BAD + "test_decrypt_reads_a_notepad_file_and_refuses_an_empty_one"),
    _fault("cipher line not bits", "a cipher line with other characters than 0 and 1 (text, a space, a full-width 0)",
           _BAD_TABLE, MORE + "test_a_cipher_line_with_characters_other_than_0_and_1_is_named"),
    _fault("character beyond 0-255", "an emoji in a reference file, which the cipher cannot encrypt",
           MSG + "test_a_reference_character_the_cipher_cannot_encrypt_names_the_file_and_line"),
    _fault("cipher of another key", "score --cipher of another key, and predictions that are noise",
           MSG + "test_score_warns_when_the_cipher_is_another_keys_or_the_predictions_are_noise"),
    _fault("very long line", "one cipher line of 4,000 characters", MORE + "test_a_very_long_cipher_line_decrypts_to_a_line_as_long"),
    _fault("split file changed by hand", "splits.json whose test lines are training lines, its digest intact",
           MORE + "test_a_split_file_whose_test_lines_are_training_lines_is_not_used"),
    _fault("split file of other data", "splits.json made from other data",
           "tests/test_data.py::test_stale_split_file_from_other_data_is_not_reused"),
    _fault("too few lines", "a data file too short to give every split a line",
           "tests/test_data_errors.py::test_too_few_lines_for_the_splits_is_an_error_naming_the_counts"),
    # --------------------------------------------------------------- checkpoints: what the tests damage by hand
    _fault("truncated checkpoint", "best.pt or a .safetensors cut short", _BAD_TABLE),
    _fault("damaged weights in best.pt", "bytes flipped inside a weight's record",
           BAD + "test_a_damaged_training_checkpoint_is_refused", _RECORDS + "[byte flipped in a record]"),
    _fault("changed bytes in the pickle", "a bit of best.pt's stored configuration (chunk_chars 32 -> 48), or any byte",
           SUM + "test_a_flipped_bit_in_a_checkpoints_stored_configuration_is_refused",
           _RECORDS + "[byte flipped in the pickle]"),
    _fault("changed record in best.pt", "another data digest in best.pt's identity, its tensors intact",
           SUM + "test_a_changed_tokenizer_or_record_in_a_checkpoint_is_refused",
           SUM + "test_a_new_checkpoint_and_export_carry_the_whole_model_checksum"),
    _fault("export of another configuration", "an export's configuration metadata changed (chunk_chars 48)",
           SUM + "test_an_export_with_another_configurations_metadata_is_refused"),
    _fault("committed model, other configuration", "a committed export with C2's configuration",
           SUM + "test_a_committed_model_with_another_models_configuration_is_refused",
           SUM + "test_the_committed_models_load_checked_without_a_note"),
    _fault("older export", "an export written before the whole-model checksum: one line naming the converter",
           SUM + "test_an_older_export_is_refused_in_one_line_and_the_converter_makes_it_load_as_it_was"),
    _fault("export without a checksum", "an export with no tensor checksum",
           "tests/test_cli.py::test_an_export_without_a_checksum_is_refused"),
    _fault("crafted huge configuration", "d_model 8192 with checksums that fit: refused before allocating",
           SUM + "test_a_crafted_configuration_is_refused_before_any_weight_is_allocated"),
    _fault("crafted configuration out of range", "chunk_chars -32 with checksums that fit",
           SUM + "test_a_crafted_configuration_out_of_range_is_refused_naming_the_file"),
    _fault("configuration with no heads", "n_heads 0 (was a ZeroDivisionError)",
           FUZZ + "test_a_configuration_with_no_heads_is_refused_not_divided_by"),
    # --------------------------------------------------------------- checkpoints: valid containers, damaged contents (fuzz)
    _fault("export metadata value", "a value in an export's configuration, tokenizers or identity JSON",
           _EXPORT + "[metadata JSON value]"),
    _fault("export tokenizer value", "a field of a tokenizer stored in an export", _EXPORT + "[tokenizer value]"),
    _fault("export metadata entry", "an export's metadata entry dropped, replaced by text or JSON, or added",
           _EXPORT + "[metadata entry]"),
    _fault("tensor dropped", "an export without one of its tensors", _EXPORT + "[tensor dropped]"),
    _fault("tensor renamed", "an export's tensor under another name", _EXPORT + "[tensor renamed]"),
    _fault("tensor added", "an extra tensor in an export", _EXPORT + "[tensor added]"),
    _fault("tensor of another dtype", "float64, float16, bfloat16 or integer weights", _EXPORT + "[tensor dtype]"),
    _fault("tensor of another shape", "a weight flattened, cut, grown or with a new axis", _EXPORT + "[tensor shape]"),
    _fault("byte flipped in an export", "one byte of one tensor", _EXPORT + "[byte flipped in a tensor]"),
    _fault("NaN or infinite weight", "a weight of NaN or +-inf, also with checksums that fit",
           _EXPORT + "[NaN or infinity in a weight]"),
    _fault("another model's metadata", "a committed model's metadata on these tensors", _EXPORT + "[another model's metadata]"),
    _fault("another model's tensors", "a committed model's tensors under this metadata", _EXPORT + "[another model's tensors]"),
    _fault("crafted export under evaluate", "an export changed with checksums that fit, through evaluate",
           FUZZ + "test_a_crafted_export_never_crashes_evaluate"),
    _fault("checkpoint value changed", "any value in best.pt's payload", _PAYLOAD + "[value changed]"),
    _fault("checkpoint configuration value", "a configuration field of best.pt", _PAYLOAD + "[config value changed]"),
    _fault("checkpoint tensor replaced", "a tensor replaced by another (dtype, shape) or by a number, text, None",
           _PAYLOAD + "[tensor replaced]"),
    _fault("checkpoint key removed", "a key removed anywhere in best.pt's payload", _PAYLOAD + "[key removed]"),
    _fault("checkpoint key added", "a key added anywhere in best.pt's payload", _PAYLOAD + "[key added]"),
    _fault("checksum of another type", "best.pt's sha256 or model_sha256 a number, None or other text",
           _PAYLOAD + "[checksum value]"),
    _fault("payload not a dict", "best.pt holding a list, tuple, tensor, number or text", _PAYLOAD + "[not a dict]"),
    _fault("record removed", "a record of best.pt's zip removed", _RECORDS + "[record removed]"),
    _fault("record resized", "a tensor record of best.pt shorter or longer", _RECORDS + "[record resized]"),
    _fault("records swapped", "two tensor records of best.pt swapped", _RECORDS + "[records swapped]"),
    _fault("pickle that calls code", "best.pt whose pickle calls os.system, eval or print",
           _RECORDS + "[pickle that calls code]", FUZZ + "test_a_pickle_that_calls_code_is_one_line_in_a_real_process",
           BAD + "test_no_module_unpickles_code"),
    _fault("byte order record", "best.pt's byteorder record changed", _RECORDS + "[byte order]"),
    # --------------------------------------------------------------- runs
    _fault("two runs, one --out", "a second train into a folder another run writes",
           RUN + "test_a_second_train_into_a_folder_in_use_is_refused_with_one_line",
           RUN + "test_the_folder_lock_is_released_when_the_run_ends"),
    _fault("two runs, one results record", "two runs of one configuration into one --results-dir, other --out",
           LOCK + "test_a_second_run_of_the_same_configuration_into_the_same_results_is_refused",
           LOCK + "test_other_configurations_and_other_results_folders_stay_free",
           LOCK + "test_a_run_that_ends_leaves_its_results_folder_free_and_clean"),
    _fault("ablate into a results record in use", "ablate's train child refused, ablate exits 1",
           LOCK + "test_ablate_into_a_results_record_in_use_fails_that_configuration"),
    _fault("torn last log line", "log.jsonl cut short by a killed run, then --resume",
           RUN + "test_a_torn_last_log_line_is_dropped_on_resume_with_a_note"),
    _fault("damaged log line", "a log.jsonl line before the last that is not JSON",
           RUN + "test_a_damaged_log_line_before_the_last_is_named"),
    _fault("torn results record", "a torn c2.json in the results folder, found before training",
           RUN + "test_a_torn_record_in_the_results_folder_is_refused_before_training"),
    _fault("ablate signalled", "SIGTERM or SIGKILL to ablate: its train child ends too",
           RUN + "test_ablate_ends_its_train_child_when_it_is_signalled"),
    _fault("NaN training loss", "the loss becomes NaN: the run stops with the last good state",
           TRAIN + "test_nan_loss_stops_with_a_clear_message_and_keeps_the_last_checkpoint"),
    _fault("NaN validation score", "validation loss or accuracy NaN is never picked as best",
           TRAIN + "test_a_nan_validation_score_stops_the_run_instead_of_being_picked_as_best"),
    _fault("NaN on long inputs only", "a part NaN from some length on is not told to lower lr",
           MSG + "test_a_model_nan_only_on_long_inputs_is_not_told_to_lower_the_learning_rate"),
    _fault("weights blown up", "NaN everywhere after updates is told to lower lr",
           MSG + "test_weights_gone_wrong_after_updates_are_still_told_to_lower_the_learning_rate"),
    _fault("results folder under a file", "--results-dir below a regular file, found before training",
           BAD + "test_train_checks_its_output_folders_before_training"),
    # --------------------------------------------------------------- disks
    _fault("full disk, results", "ENOSPC while writing c1.json, its log or the table",
           MSG + "test_a_failing_write_leaves_every_results_file_as_it_was"),
    _fault("full disk, evaluate --json", "ENOSPC under evaluate --json", _DISK + "[evaluate --json]"),
    _fault("full disk, score --json", "ENOSPC under score --json", _DISK + "[score --json]"),
    _fault("full disk, doctor --json", "ENOSPC under doctor --json", _DISK + "[doctor --json]"),
    _fault("full disk, report", "ENOSPC under report --out", _DISK + "[report --out]"),
    _fault("full disk, export", "ENOSPC under export", MORE + "test_a_full_disk_under_export_names_the_file"),
    _fault("read-only disk, export", "a read-only file system under export",
           BAD + "test_export_onto_a_read_only_disk_is_one_line"),
    _fault("read-only disk, outputs", "a read-only file system under an output check",
           BAD + "test_output_checks_name_a_read_only_file_system"),
    _fault("read-only data folder", "splits.json cannot be saved: a note, the same split",
           BAD + "test_a_read_only_data_folder_still_evaluates"),
    _fault("output under a file", "an output path below a regular file", _BAD_TABLE),
    _fault("writing into results/", "every writing command aimed at the committed results/",
           RO + "test_no_command_writes_inside_the_committed_results", RO + "test_train_results_dir_results_passes_the_guard"),
    _fault("a link into results/", "a symlink into results/, even where results/ is allowed",
           RO + "test_a_link_into_results_is_refused_even_where_results_is_allowed"),
    # --------------------------------------------------------------- the command line
    _fault("unknown device", "--device tpu, meta, cuda:x", MSG + "test_an_unknown_device_names_the_flag_and_the_choices",
           MSG + "test_doctor_refuses_a_device_cipherlab_does_not_run_on"),
    _fault("score sizes below one", "score --chunk -3 or 0, --first 0 or -5", MSG + "test_score_sizes_below_one_name_the_flag_and_the_range"),
    _fault("beam below one", "--beam 0", "tests/test_cli.py::test_bad_input_gets_a_one_line_error_and_a_nonzero_exit"),
    _fault("beam too wide", "--beam 33 or 100000 (before: hours)", MORE + "test_a_beam_too_wide_to_finish_is_refused_before_decoding",
           MORE + "test_the_widest_beam_allowed_decodes"),
    _fault("usage error", "--beam two", BAD + "test_a_usage_error_is_one_line_too"),
    _fault("SIGPIPE", "the reader of stdout goes away (| head -1), in a real process and inside a command",
           MSG + "test_a_reader_closing_the_pipe_ends_the_command_quietly",
           MSG + "test_a_broken_pipe_inside_a_command_is_not_reported_as_a_path"),
    _fault("unforeseen error", "an exception nobody foresaw: one line and how to see the traceback",
           BAD + "test_an_error_nobody_foresaw_is_one_line_too", BAD + "test_the_real_entry_points_print_one_line"),
    _fault("part exits at import", "a --part file calling sys.exit(3)", MSG + "test_a_part_that_exits_at_import_is_named"),
    _fault("part loops at import", "a --part file that never returns", MSG + "test_a_part_that_loops_at_import_is_stopped_by_a_time_limit"),
    # --------------------------------------------------------------- a student's part, past its interface
    _fault("part changes a tensor autograd saved", "an in-place /= on a tensor the backward pass needs, refused before "
           "training with the line that made it", _AUTOGRAD + "[in-place division]"),
    _fault("part parameter gets no gradient", "a gain used under torch.no_grad(): refused before training, naming it",
           _AUTOGRAD + "[gain under no_grad]"),
    _fault("part output carries no gradient", "a forward under @torch.no_grad(): refused before training",
           _AUTOGRAD + "[forward under no_grad]"),
    _fault("part turns gradients off", "torch.set_grad_enabled(False) in forward: undone, refused before training",
           _AUTOGRAD + "[grad mode off in forward]"),
    _fault("part raises during training", "an exception in a part on longer inputs, mid-training: the student's, "
           "with file, line and class, not a bug in cipherlab", _RAISES + "[train]"),
    _fault("part raises during evaluation", "the same under evaluate", _RAISES + "[evaluate]"),
    _fault("part raises during decoding", "the same under decrypt", _RAISES + "[decrypt]",
           BLAME + "test_blame_finds_the_innermost_frame_in_the_students_file"),
    _fault("part sets the default dtype", "torch.set_default_dtype(torch.float64) in forward, the constructor or at "
           "import: the whole model would be float64; undone and refused",
           _GLOBAL + "[default dtype in forward]", _GLOBAL + "[default dtype in the constructor]",
           _GLOBAL + "[default dtype at import]", BLAME + "test_check_names_a_part_that_changed_the_default_dtype"),
    _fault("part forward never returns", "a loop in forward: stopped by a time limit in train's trial and in check",
           BLAME + "test_a_forward_that_never_returns_is_stopped_in_the_trial",
           BLAME + "test_a_forward_that_never_returns_is_stopped_in_check"),
    _fault("part leaves a thread running", "a non-daemon thread started by a part: check still ends, with a note",
           BLAME + "test_a_thread_left_running_by_a_part_does_not_keep_check_from_ending"),
    _fault("closed stdout", "python -m cipherlab ... >&-, or stdout closed during a command: one line, not a bug",
           BLAME + "test_a_closed_stdout_is_one_line_not_a_bug",
           BLAME + "test_stdout_closed_during_a_command_is_one_line_not_a_bug"),
    _fault("reader reads nothing", "python -m cipherlab ... | head -c0: quiet, exit 0 or 141",
           BLAME + "test_a_reader_that_reads_nothing_ends_the_command_quietly"),
    # --------------------------------------------------------------- settings out of range (one class each)
    _fault("label_smoothing out of range", "label_smoothing=2 (was a RuntimeError in training)", *_RANGE),
    _fault("seed out of range", "seed=-1 or 2**32", *_RANGE),
    _fault("dropout out of range", "dropout=2 or 1", *_RANGE),
    _fault("lr out of range", "lr=-1, 0 or NaN", *_RANGE),
    _fault("grad_clip out of range", "grad_clip=-1 (gradient ascent) or 0 (no step moves)", *_RANGE),
    _fault("weight_decay out of range", "weight_decay=-1", *_RANGE),
    _fault("max_epochs zero", "max_epochs=0 trains nothing", *_RANGE),
    # --------------------------------------------------------------- holes (issue 54): data lost
    _fault("resume without last.pt", "train --resume where last.pt is gone (it started again over best.pt and the log)",
           HOLES + "test_resume_without_last_pt_is_refused_and_keeps_best_and_the_log"),
    _fault("resume without best.pt", "train --resume where best.pt is gone (it said 'time budget', for ever)",
           HOLES + "test_resume_without_best_pt_names_it_not_a_time_budget"),
    _fault("export-split over a student's file", "data export-split into a folder holding one's own test_plain.txt",
           HOLES + "test_export_split_keeps_a_students_own_file_unless_forced"),
    _fault("results/ of a checkout, installed cipherlab", "the guard found only the package's own results/",
           HOLES + "test_the_results_guard_finds_a_checkouts_results_from_the_target"),
    # --------------------------------------------------------------- holes: silent wrong numbers
    _fault("splits sharing lines", "data verify on a file whose repeated lines land in two splits",
           HOLES + "test_data_verify_refuses_splits_that_share_lines",
           HOLES + "test_data_verify_still_passes_splits_of_distinct_lines"),
    _fault("NFD predictions", "score of decomposed accents against composed references (0 % exact, no word)",
           HOLES + "test_score_composes_nfd_predictions_and_says_so"),
    _fault("record contradicting its totals", "exact_by_line against exact_lines, or sequence_accuracy against both",
           HOLES + "test_report_refuses_a_record_whose_lines_contradict_its_totals"),
    _fault("warmup_steps out of range", "--set warmup_steps=-5 ran as 1, the record saying -5",
           HOLES + "test_a_setting_once_unchecked_is_one_line_naming_the_flag[warmup_steps=-5]"),
    _fault("betas out of range", "--set betas=1.5,0.9 or a NaN beta (torch's message, no flag)",
           HOLES + "test_a_setting_once_unchecked_is_one_line_naming_the_flag[betas=1.5,0.9]",
           HOLES + "test_a_setting_once_unchecked_is_one_line_naming_the_flag[betas=0.9,nan]"),
    _fault("blt_entropy_percentile out of range", "150 or NaN (found at C5's entropy model, no flag)",
           HOLES + "test_a_setting_once_unchecked_is_one_line_naming_the_flag[blt_entropy_percentile=150]",
           HOLES + "test_a_setting_once_unchecked_is_one_line_naming_the_flag[blt_entropy_percentile=nan]"),
    _fault("vocabulary size out of range", "src_vocab=0, tgt_vocab=-3, or below the base symbols (named vocab_size)",
           HOLES + "test_a_setting_once_unchecked_is_one_line_naming_the_flag[src_vocab=0]",
           HOLES + "test_a_setting_once_unchecked_is_one_line_naming_the_flag[tgt_vocab=-3]",
           HOLES + "test_a_vocabulary_below_the_base_symbols_names_the_flag"),
    _fault("plan numbers not finite", "plan --tflops nan (tables of 'nan h'), --hours inf (NaN to integer)",
           HOLES + "test_plan_refuses_a_number_that_is_not_finite"),
    _fault("decrypt, cipher of another key", "decrypt of another key's cipher: fluent nonsense without a word",
           HOLES + "test_decrypt_warns_when_the_cipher_is_another_keys"),
    _fault("plaintext outside the training alphabet", "evaluate on text of characters the model never wrote",
           HOLES + "test_evaluate_warns_when_the_plaintext_is_outside_the_training_alphabet"),
    # --------------------------------------------------------------- holes: false reasons, minor
    _fault("decrypt --input -", "a pipe into decrypt was 'no such input file'", HOLES + "test_decrypt_reads_stdin_for_input_dash"),
    _fault("export mode 0600", "exports unreadable to others, every other file 0644",
           HOLES + "test_an_export_is_as_readable_as_any_other_file"),
    _fault("newer record schema", "a record of a newer cipherlab was told to convert it (0 converted)",
           HOLES + "test_report_advice_for_a_newer_schema_is_to_update_not_to_convert"),
    # --------------------------------------------------------------- holes: security
    _fault("archive member outside its folder", "the setup cell unpacking an upload holding ../escaped.txt (3.11)",
           HOLES + "test_the_setup_cell_writes_no_archive_member_outside_its_folder[data_filter]",
           HOLES + "test_the_setup_cell_writes_no_archive_member_outside_its_folder[no filter]"),
    # --------------------------------------------------------------- holes: a student's machine is not CI's
    _fault("read-only checkout, uncached tokenizers", "train on a read-only data folder (the cache could not be made)",
           HOLES + "test_a_read_only_checkout_still_trains_with_notes"),
    _fault("Drive path with spaces and accents", "train --resume, decrypt, export under 'My Drive/Übung ç/'",
           HOLES + "test_a_drive_folder_with_spaces_and_accents_works_throughout"),
    _fault("kernel restarted mid-run", "a run SIGKILLed with its kernel leaves its record's lock file behind",
           HOLES + "test_a_run_killed_with_its_kernel_leaves_no_lock_that_stops_the_next"),
    _fault("two chapters, one tokenizer cache", "two processes fitting the same tokenizer into one cache at once",
           HOLES + "test_two_chapters_fitting_one_tokenizer_at_once_share_the_cache"),
    _fault("console that is not UTF-8", "an ASCII locale or a Windows code page: printing 'Übung' failed after the work",
           HOLES + "test_a_console_that_is_not_utf8_shows_an_accented_path_escaped",
           HOLES + "test_decrypt_refuses_a_line_its_console_cannot_write_rather_than_escape_it"),
    _fault("Python without fcntl", "Windows' Python: the run's locks cannot be taken; it trains unlocked",
           HOLES + "test_a_python_without_fcntl_trains_unlocked"),
]

# --------------------------------------------------------------- more of a student's machine and habits (issue 54)
STUDENT = "tests/test_faults_student.py::"
FAULT_CLASSES += [
    _fault("--out an existing file", "train --out naming a file, not a folder (one line; the file kept)",
           STUDENT + "test_train_out_naming_an_existing_file_is_one_line_and_keeps_it"),
    _fault("training cell run twice", "a notebook re-running its train cell into a finished run's folder",
           STUDENT + "test_a_training_cell_run_twice_is_refused_unless_overwrite"),
    _fault("--set with Python-style values", "True, 1e-3, 1_000, None read as Python reads them; 1e3 or 2.0 "
           "for an integer named, never rounded", STUDENT + "test_python_style_set_values_are_read_as_python_writes_them"),
    _fault("a --set given twice", "an earlier cell's --set left in the command: the last wins, the record says so",
           STUDENT + "test_a_setting_given_twice_takes_the_last"),
    _fault("splits.json saved by a Windows editor", "a byte-order mark and CRLF: it was 'made from other data' "
           "and rewritten", STUDENT + "test_a_split_file_resaved_with_a_bom_and_crlf_is_the_same_split"),
    _fault("data files saved by Notepad", "brown_plain/brown_cipher with a byte-order mark and CRLF: the same numbers",
           STUDENT + "test_data_files_saved_by_notepad_train_to_the_same_numbers"),
    _fault("data file saved as UTF-16", "Notepad's 'Unicode' for brown_plain.txt: one line naming it and line 1",
           STUDENT + "test_a_data_file_saved_as_utf16_is_one_line_naming_it"),
    _fault("record re-saved by an editor", "c1.json re-indented, with a BOM, CRLF and trailing blanks (was refused "
           "as not JSON)", STUDENT + "test_a_record_reformatted_by_an_editor_reports_the_same"),
    _fault("last line without a newline", "decrypt of a file whose last line has no newline: the same lines",
           STUDENT + "test_decrypt_of_a_last_line_without_a_newline_is_the_same"),
    _fault("another working folder", "relative paths from a notebook's own folder; a missing one named as typed",
           STUDENT + "test_relative_paths_from_another_working_folder"),
    _fault("quoted ~ in a path", "--out \"~/run\" made a folder named '~' where --data-dir \"~/data\" was home's",
           STUDENT + "test_a_quoted_tilde_path_is_the_home_folder"),
    _fault("part with a syntax error or missing import", "train --part: one line naming FILE:LINE (the import's "
           "line was not given)", STUDENT + "test_a_part_with_a_syntax_error_or_a_missing_import_names_its_line"),
    _fault("part printing at import", "a print at the top of a part's file went into decrypt's output lines",
           STUDENT + "test_a_part_printing_at_import_keeps_stdout_for_the_output"),
    _fault("checkpoint from a GPU machine", "a best.pt whose tensors are tagged cuda:0, decrypted on a CPU: the same",
           STUDENT + "test_a_checkpoint_saved_on_a_gpu_decrypts_the_same_on_a_cpu"),
    _fault("GPUs hidden by CUDA_VISIBLE_DEVICES", "--device cuda under CUDA_VISIBLE_DEVICES='' or '-1' (the "
           "variable was not named)", STUDENT + "test_gpus_hidden_by_cuda_visible_devices_are_named"),
    _fault("unwritable TORCH_HOME and HF_HOME", "caches of torch, Hugging Face and XDG below a file: training runs",
           STUDENT + "test_unwritable_torch_and_hf_homes_do_not_stop_training"),
    _fault("another PYTHONHASHSEED", "a student's string hashing seed: the same tokenizers, split and numbers",
           STUDENT + "test_another_pythonhashseed_gives_the_same_results"),
]
