"""Shell launch scripts: what is renamed for each target, what is reported, and what is never touched."""

from __future__ import annotations

import pytest

from portlayer.migrate.shell import migrate_shell

LAUNCH = """\
#!/usr/bin/env bash
# Pick GPUs with CUDA_VISIBLE_DEVICES; NCCL_DEBUG=INFO helps when NCCL hangs.
set -euo pipefail
export CUDA_VISIBLE_DEVICES=0,1
export NCCL_SOCKET_IFNAME=eth0 NCCL_IB_DISABLE=1
NGPUS=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\\n' | wc -l)
torchrun --nproc_per_node "$NGPUS" train.py --cuda  # the flag stays: it is the program's
python -m torch.distributed.run --nproc_per_node 2 train.py
"""


def codes(result):
    return [(d.code, d.line) for d in result.diagnostics]


# The vendors' own names (Ascend: ASCEND_RT_VISIBLE_DEVICES, HCCL_SOCKET_IFNAME; Moore Threads:
# MUSA_VISIBLE_DEVICES, MCCL_SOCKET_IFNAME), as the README's variable table lists them.
VENDOR_NAMES = {
    "npu": ("ASCEND_RT_VISIBLE_DEVICES", "HCCL_SOCKET_IFNAME"),
    "musa": ("MUSA_VISIBLE_DEVICES", "MCCL_SOCKET_IFNAME"),
}


@pytest.mark.parametrize("target", sorted(VENDOR_NAMES))
def test_vendor_targets_rename_variables_to_the_vendors_names(target):
    visible, socket = VENDOR_NAMES[target]

    result = migrate_shell(LAUNCH, target)

    lines = result.code.splitlines()
    assert lines[3] == f"export {visible}=0,1"
    assert lines[4].startswith(f"export {socket}=eth0 ")
    assert lines[5] == f"NGPUS=$(echo \"${visible}\" | tr ',' '\\n' | wc -l)"
    # comments, the program's own flags and the launcher lines are untouched
    assert lines[:3] + lines[6:] == LAUNCH.splitlines()[:3] + LAUNCH.splitlines()[6:]
    assert {(c.code, c.line) for c in result.changes} == {("PL107", 4), ("PL107", 5), ("PL107", 6)}


def test_npu_reports_nccl_variables_without_an_hccl_equivalent():
    result = migrate_shell(LAUNCH, "npu")

    assert "NCCL_IB_DISABLE=1" in result.code
    assert codes(result) == [("PL605", 5)]
    assert result.diagnostics[0].col == LAUNCH.splitlines()[4].index("NCCL_IB_DISABLE") + 1


def test_musa_renames_every_nccl_setting_mccl_reads():
    assert "export MCCL_SOCKET_IFNAME=eth0 MCCL_IB_DISABLE=1" in migrate_shell(LAUNCH, "musa").code


@pytest.mark.parametrize("target", ["neutral", "torch"])
def test_neutral_and_torch_leave_scripts_as_they_are_with_one_info(target):
    result = migrate_shell(LAUNCH, target)

    assert result.code == LAUNCH
    assert result.changes == ()
    [info] = result.diagnostics
    assert (info.code, info.line, info.severity) == ("PL604", 4, "info")
    assert "CUDA_VISIBLE_DEVICES, NCCL_IB_DISABLE, NCCL_SOCKET_IFNAME" in info.message


@pytest.mark.parametrize("target", ["neutral", "torch", "npu", "musa"])
def test_nvidia_smi_in_code_is_reported_for_every_target_but_not_in_comments(target):
    script = "# check with nvidia-smi first\nN=$(nvidia-smi -L | wc -l)\nwatch -n1 nvidia-smi\n"

    result = migrate_shell(script, target)

    assert result.code == script
    assert codes(result) == [("PL603", 2), ("PL603", 3)]
    if target == "npu":
        assert "npu-smi" in result.diagnostics[0].hint


@pytest.mark.parametrize(
    "line, renamed",
    [
        ("CUDA_VISIBLE_DEVICES=0 python train.py", "ASCEND_RT_VISIBLE_DEVICES=0 python train.py"),
        ("A=1 CUDA_VISIBLE_DEVICES=0 python train.py", "A=1 ASCEND_RT_VISIBLE_DEVICES=0 python train.py"),
        ("env -u X CUDA_VISIBLE_DEVICES=1 python t.py", "env -u X ASCEND_RT_VISIBLE_DEVICES=1 python t.py"),
        ("env -u CUDA_VISIBLE_DEVICES python t.py", "env -u ASCEND_RT_VISIBLE_DEVICES python t.py"),
        ("declare -x CUDA_VISIBLE_DEVICES", "declare -x ASCEND_RT_VISIBLE_DEVICES"),
        (
            "unset CUDA_VISIBLE_DEVICES NCCL_SOCKET_IFNAME",
            "unset ASCEND_RT_VISIBLE_DEVICES HCCL_SOCKET_IFNAME",
        ),
        ("if true; then CUDA_VISIBLE_DEVICES=2 cmd; fi", "if true; then ASCEND_RT_VISIBLE_DEVICES=2 cmd; fi"),
        ("x=${#CUDA_VISIBLE_DEVICES}", "x=${#ASCEND_RT_VISIBLE_DEVICES}"),
        (
            'echo "${CUDA_VISIBLE_DEVICES:-${NCCL_SOCKET_IFNAME}}"',
            'echo "${ASCEND_RT_VISIBLE_DEVICES:-${HCCL_SOCKET_IFNAME}}"',
        ),
        ("n=`echo $CUDA_VISIBLE_DEVICES`", "n=`echo $ASCEND_RT_VISIBLE_DEVICES`"),
        ("(CUDA_VISIBLE_DEVICES=3 cmd) && cmd2", "(ASCEND_RT_VISIBLE_DEVICES=3 cmd) && cmd2"),
        ("$(CUDA_VISIBLE_DEVICES=3 cmd)", "$(ASCEND_RT_VISIBLE_DEVICES=3 cmd)"),
        ("export NCCL_BUFFSIZE=2097152", "export HCCL_BUFFSIZE=2"),
        ("NCCL_BUFFSIZE='8388608' cmd", "HCCL_BUFFSIZE='8' cmd"),
    ],
)
def test_variable_positions_are_renamed(line, renamed):
    assert migrate_shell(line + "\n", "npu").code == renamed + "\n"


@pytest.mark.parametrize(
    "line",
    [
        "# export CUDA_VISIBLE_DEVICES=0",
        "echo 'CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES'",  # single quotes: text
        'echo "set CUDA_VISIBLE_DEVICES first"',  # text in double quotes
        "echo \\$CUDA_VISIBLE_DEVICES",  # escaped
        "python train.py CUDA_VISIBLE_DEVICES=0",  # an argument, not an assignment
        "mpirun -x NCCL_SOCKET_IFNAME=eth0 python t.py",
        "echo ${MY_CUDA_VISIBLE_DEVICES} $XNCCL_DEBUG",  # other variables
    ],
)
def test_text_comments_and_arguments_are_never_renamed(line):
    assert migrate_shell(line + "\n", "npu").code == line + "\n"


def test_names_left_in_code_are_reported_with_a_hint_to_rename_by_hand():
    result = migrate_shell("mpirun -x NCCL_SOCKET_IFNAME=eth0 -x NCCL_DEBUG python t.py\n", "npu")

    assert [(d.code, d.col) for d in result.diagnostics] == [("PL602", 11), ("PL605", 38)]
    assert "rename it to HCCL_SOCKET_IFNAME by hand" in result.diagnostics[0].hint


# Megatron-LM's SBATCH.sh / SRUN.sh shapes: a scheduler's directive is a comment to bash, a setting to Slurm.
SLURM_SCRIPT = """#!/bin/bash
#SBATCH --nodes=2 --gres=gpu:8
#SBATCH --export=ALL,CUDA_VISIBLE_DEVICES=0,1,2,3,NCCL_IB_HCA=mlx5
#PBS -v CUDA_DEVICE_MAX_CONNECTIONS=1
# CUDA_VISIBLE_DEVICES in a plain comment stays unmentioned
srun --export=ALL,NCCL_SOCKET_IFNAME=eth0 python train.py
"""


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("npu", [("PL601", 3, 22), ("PL605", 3, 51), ("PL607", 4, 9), ("PL602", 6, 19)]),
        ("musa", [("PL601", 3, 22), ("PL602", 3, 51), ("PL607", 4, 9), ("PL602", 6, 19)]),
        ("neutral", [("PL604", 3, 22), ("PL607", 4, 9)]),
    ],
)
def test_variables_in_scheduler_directives_are_reported_never_renamed(target, expected):
    result = migrate_shell(SLURM_SCRIPT, target)

    assert result.code == SLURM_SCRIPT
    assert [(d.code, d.line, d.col) for d in result.diagnostics] == expected


def test_a_value_that_needs_converting_but_is_not_a_number_is_reported():
    script = 'export NCCL_BUFFSIZE="$BUF"\necho $NCCL_BUFFSIZE\n'

    result = migrate_shell(script, "npu")

    assert result.code == script
    assert codes(result) == [("PL608", 1), ("PL608", 2)]


def test_here_documents_quoted_are_data_and_unquoted_expand():
    script = (
        "cat > cfg.txt <<'EOF'\nexport CUDA_VISIBLE_DEVICES=1\nEOF\n"
        "cat <<-EOF\n\tdevices: $CUDA_VISIBLE_DEVICES\n\tEOF\n"
        "export CUDA_VISIBLE_DEVICES=2\n"
    )

    result = migrate_shell(script, "npu")

    assert result.code.splitlines() == [
        "cat > cfg.txt <<'EOF'",
        "export CUDA_VISIBLE_DEVICES=1",
        "EOF",
        "cat <<-EOF",
        "\tdevices: $ASCEND_RT_VISIBLE_DEVICES",
        "\tEOF",
        "export ASCEND_RT_VISIBLE_DEVICES=2",
    ]
    assert codes(result) == [("PL601", 2)]  # the quoted body's text is reported, not rewritten


@pytest.mark.parametrize("target", ["npu", "musa"])
def test_a_second_run_changes_nothing(target):
    once = migrate_shell(LAUNCH, target).code

    again = migrate_shell(once, target)

    assert again.code == once
    assert again.changes == ()


def test_unbalanced_quotes_do_not_crash_or_rewrite_what_follows():
    script = "echo 'unterminated\nexport CUDA_VISIBLE_DEVICES=0\n"

    assert migrate_shell(script, "npu").code == script


@pytest.mark.parametrize("target", ["neutral", "torch", "npu", "musa"])
def test_settings_only_cuda_reads_are_reported_for_every_target_and_user_variables_are_not(target):
    script = (
        "export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-1}\n"
        "CUDA_LAUNCH_BLOCKING=1 TORCH_NCCL_AVOID_RECORD_STREAMS=1 python t.py\n"
        'CUDA_FLAG="--cuda"\n'
        "python main.py $CUDA_FLAG\n"
    )

    first, second = script.splitlines()[:2]

    result = migrate_shell(script, target)

    assert result.code == script
    assert [(d.code, d.line, d.col) for d in result.diagnostics] == [
        ("PL607", 1, first.index("CUDA_DEVICE") + 1),
        ("PL607", 1, first.rindex("CUDA_DEVICE") + 1),
        ("PL607", 2, 1),
        ("PL607", 2, second.index("TORCH_NCCL") + 1),
    ]


@pytest.mark.parametrize("target, renamed", [("npu", "PYTORCH_NPU_ALLOC_CONF"), ("musa", "PYTORCH_MUSA_ALLOC_CONF")])
def test_allocator_settings_the_vendor_shares_are_renamed_and_a_cuda_only_backend_is_reported(target, renamed):
    script = (
        "export PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'\n"
        'PYTORCH_CUDA_ALLOC_CONF="backend:cudaMallocAsync" python t.py\n'
    )

    result = migrate_shell(script, target)

    assert result.code == script.replace("PYTORCH_CUDA_ALLOC_CONF", renamed, 1)
    assert [(c.code, c.line) for c in result.changes] == [("PL107", 1)]
    assert [(d.code, d.line, d.col) for d in result.diagnostics] == [("PL614", 2, 1)]


# bash's quoting and expansion rules, case by case: what is an expansion of a CUDA variable (renamed for
# npu, PL107 at the name's column), what only looks like one (reported, PL601), and where a command starts.
LEXING = [
    ('echo "\\"$CUDA_VISIBLE_DEVICES\\""', 'echo "\\"$ASCEND_RT_VISIBLE_DEVICES\\""', [], [10]),
    ("echo ${#CUDA_VISIBLE_DEVICES}", "echo ${#ASCEND_RT_VISIBLE_DEVICES}", [], [9]),
    (" echo ${#CUDA_VISIBLE_DEVICES}", " echo ${#ASCEND_RT_VISIBLE_DEVICES}", [], [10]),
    ("echo ${!CUDA_VISIBLE_DEVICES}", "echo ${!ASCEND_RT_VISIBLE_DEVICES}", [], [9]),
    ("X=$(nproc)$CUDA_VISIBLE_DEVICES", "X=$(nproc)$ASCEND_RT_VISIBLE_DEVICES", [], [12]),
    ("echo ${X:-'}'} $CUDA_VISIBLE_DEVICES", "echo ${X:-'}'} $ASCEND_RT_VISIBLE_DEVICES", [], [17]),
    ("echo $((1+2)) $CUDA_VISIBLE_DEVICES", "echo $((1+2)) $ASCEND_RT_VISIBLE_DEVICES", [], [16]),
    ("echo $'it\\'s' $CUDA_VISIBLE_DEVICES", "echo $'it\\'s' $ASCEND_RT_VISIBLE_DEVICES", [], [16]),
    ("echo `echo $CUDA_VISIBLE_DEVICES`", "echo `echo $ASCEND_RT_VISIBLE_DEVICES`", [], [13]),
    ('a=$(echo ")"); nvidia-smi', None, [("PL603", 16)], []),  # the ")" is quoted: nvidia-smi is a command
    ("echo $$CUDA_VISIBLE_DEVICES", None, [("PL601", 8)], []),  # $$ is the shell's pid, then plain text
    ("echo '$CUDA_VISIBLE_DEVICES' $CUDA_VISIBLE_DEVICES", "echo '$CUDA_VISIBLE_DEVICES' $ASCEND_RT_VISIBLE_DEVICES",
     [("PL601", 8)], [31]),
    ('echo "${CUDA_VISIBLE_DEVICES}" && nvidia-smi -L', 'echo "${ASCEND_RT_VISIBLE_DEVICES}" && nvidia-smi -L',
     [("PL603", 35)], [9]),
]


@pytest.mark.parametrize(("line", "renamed", "diagnostics", "change_columns"), LEXING)
def test_expansions_are_found_as_bash_reads_them(line, renamed, diagnostics, change_columns):
    result = migrate_shell(line + "\n", "npu")
    assert result.code == (line if renamed is None else renamed) + "\n"
    assert [(d.code, d.col) for d in result.diagnostics] == diagnostics
    assert [(c.code, c.col) for c in result.changes] == [("PL107", column) for column in change_columns]


@pytest.mark.parametrize(("line", "renamed", "change_columns"), [
    ("env -u CUDA_VISIBLE_DEVICES python x.py", "env -u MUSA_VISIBLE_DEVICES python x.py", [8]),
    ("env -i --unset CUDA_VISIBLE_DEVICES NCCL_DEBUG=INFO python x.py",
     "env -i --unset MUSA_VISIBLE_DEVICES MCCL_DEBUG=INFO python x.py", [16, 37]),
    ("env -i -u NCCL_DEBUG python x.py", "env -i -u MCCL_DEBUG python x.py", [11]),
])
def test_env_unsets_and_assignments_are_renamed(line, renamed, change_columns):
    result = migrate_shell(line + "\n", "musa")
    assert result.code == renamed + "\n"
    assert [(c.code, c.col) for c in result.changes] == [("PL107", column) for column in change_columns]


# Subshells inside $( ), and here-documents: an unquoted delimiter expands the body (renamed), a quoted one
# keeps it literal (reported as looking like a variable), <<- strips leading tabs before the delimiter.
SCRIPTS = [
    ("X=$( (nvidia-smi) ); echo $CUDA_VISIBLE_DEVICES\n", "X=$( (nvidia-smi) ); echo $ASCEND_RT_VISIBLE_DEVICES\n",
     [("PL603", 1, 7)], [(1, 28)]),
    ("cat <<EOF\n$CUDA_VISIBLE_DEVICES\nEOF\necho $NCCL_DEBUG\n",
     "cat <<EOF\n$ASCEND_RT_VISIBLE_DEVICES\nEOF\necho $NCCL_DEBUG\n", [("PL605", 4, 7)], [(2, 2)]),
    ("cat <<'EOF'\n$CUDA_VISIBLE_DEVICES\nEOF\necho $NCCL_DEBUG\n", None, [("PL601", 2, 2), ("PL605", 4, 7)], []),
    ("cat <<-EOF\n\t$CUDA_VISIBLE_DEVICES\n\tEOF\nnvidia-smi\n",
     "cat <<-EOF\n\t$ASCEND_RT_VISIBLE_DEVICES\n\tEOF\nnvidia-smi\n", [("PL603", 4, 1)], [(2, 3)]),
]


@pytest.mark.parametrize(("script", "renamed", "diagnostics", "changes"), SCRIPTS)
def test_subshells_and_here_documents(script, renamed, diagnostics, changes):
    result = migrate_shell(script, "npu")
    assert result.code == (script if renamed is None else renamed)
    assert [(d.code, d.line, d.col) for d in result.diagnostics] == diagnostics
    assert [(c.line, c.col) for c in result.changes] == changes


@pytest.mark.parametrize(("target", "why"), [
    ("neutral", "portlayer's runtime carries them over to the active backend"),
    ("torch", "their names depend on the vendor; run with --target npu or --target musa to rename them"),
])
def test_the_info_says_why_variables_are_left(target, why):
    [info] = migrate_shell("export CUDA_VISIBLE_DEVICES=0\n", target).diagnostics
    assert (info.code, info.line, info.col) == ("PL604", 1, 8)
    assert info.message == f"left CUDA_VISIBLE_DEVICES as is: {why}"
