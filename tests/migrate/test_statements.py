"""The rules see only the statements that can concern them, with names resolved by Python's scoping
rules over the whole file: what they convert must not depend on how much of the file they were shown."""

import libcst as cst
import pytest

from portlayer.migrate.engine import TARGETS, migrate_source, prefilter, run_rules
from portlayer.migrate.engine.analysis import analyse, source_lines
from portlayer.migrate.engine.snippets import Snippets
from portlayer.migrate.targets import target_named

NEUTRAL = prefilter(target_named("neutral")).trigger


def converted_lines(source: str) -> list[int]:
    return sorted({change.line for change in migrate_source(source).changes if change.code != "PL110"})


# -- scoping ----------------------------------------------------------------------------------------


def test_a_parameter_a_comprehension_variable_or_a_local_assignment_shadows_an_import():
    source = (
        "from torch import cuda\n"
        "def f(cuda):\n"
        "    cuda.synchronize()\n"
        "def g(xs):\n"
        "    return [cuda.synchronize() for cuda in xs]\n"
        "def h():\n"
        "    cuda = make()\n"
        "    cuda.synchronize()\n"
        "cuda.synchronize()\n"
    )
    assert converted_lines(source) == [9]


def test_global_reaches_the_module_and_a_class_body_is_not_its_methods_scope():
    source = (
        "from torch import cuda\n"
        "def f():\n"
        "    global cuda\n"
        "    cuda.synchronize()\n"
        "    cuda = None\n"
        "class A:\n"
        "    cuda = None\n"
        "    cuda.synchronize()\n"
        "    def m(self):\n"
        "        cuda.synchronize()\n"
    )
    assert converted_lines(source) == [4, 10]


def test_an_import_inside_a_function_binds_there_only():
    source = (
        "def f():\n"
        "    import torch as th\n"
        "    th.cuda.synchronize()\n"
        "def g(th):\n"
        "    th.cuda.synchronize()\n"
    )
    assert converted_lines(source) == [3]


def test_an_alias_is_followed_into_statements_that_never_spell_the_trigger():
    source = (
        "import torch\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "from torch import cuda as gpu\n"
        "model = DDP(model, device_ids=[rank], output_device=rank)\n"
        "gpu.synchronize()\n"
    )
    assert migrate_source(source).code == (
        "import portlayer\n"
        "import torch\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "model = DDP(model, device_ids=portlayer.ddp_device_ids(rank))\n"
        "portlayer.synchronize()\n"
    )


def test_a_definition_without_a_trigger_word_is_still_read_where_it_reads_an_alias():
    # Most definitions of a large module have no rule's word and are not walked into; one that reads a
    # name a CUDA import binds still is.
    source = (
        "from torch.cuda import synchronize as wait_for_device\n"
        "class Trainer:\n"
        "    def step(self, batch):\n"
        "        loss = self.model(batch)\n"
        "        wait_for_device()\n"
        "        return loss\n"
        "    def log(self, loss):\n"
        "        print(loss)\n"
    )
    assert converted_lines(source) == [5]


def test_a_statement_without_a_trigger_word_still_binds_and_is_read_where_it_reads_an_alias():
    source = (
        "import torch\n"
        "from torch.cuda import synchronize as wait_for_device\n"
        "def step(batch):\n"
        "    torch = load_backend()\n"  # the function's own `torch`: its `torch.cuda` is not torch's
        "    torch.cuda.synchronize()\n"
        "    done = wait_for_device()\n"
        "    wait_for_device()\n"
        "    return batch\n"
        "torch.cuda.synchronize()\n"
    )
    assert converted_lines(source) == [6, 7, 9]


def test_a_rule_with_module_hooks_must_say_it_looks_across_statements():
    # A rule is shown only the statements with its words, one by one: its module hooks would never run.
    from portlayer.migrate.engine.triggers import Words
    from portlayer.migrate.rules.base import Rule

    with pytest.raises(TypeError, match="leave_Module runs only for a rule that LOOKS_ACROSS_STATEMENTS"):
        class CountsUses(Rule):  # noqa: F841
            TRIGGER = Words(("cuda",))

            def leave_Module(self, original_node, updated_node):
                return updated_node


def test_a_walrus_in_a_default_binds_where_the_definition_stands():
    # `torch` is then the module's own name, not torch: even a definition without a rule's word is read
    # for what its defaults and decorators bind.
    source = (
        "def configure(backend=(torch := load_backend())):\n"
        "    return backend\n"
        "torch.cuda.synchronize()\n"
    )
    assert converted_lines(source) == []
    assert converted_lines(source.replace("(torch := load_backend())", "load_backend()")) == [3]


def test_an_assignment_target_is_not_read_as_the_import_it_shadows():
    source = "from torch import cuda\ncuda = cuda.synchronize\n"
    assert migrate_source(source).code == "import portlayer\nfrom torch import cuda\ncuda = portlayer.synchronize\n"


def test_columns_count_characters_on_lines_with_non_ascii_text():
    source = 'import torch\nx = "é"; torch.cuda.synchronize()\n'
    (change,) = [c for c in migrate_source(source).changes if c.code != "PL110"]
    assert (change.line, change.col) == (2, 10)


# -- which lines the rules see ------------------------------------------------------------------------


def spans(source: str) -> list[tuple[int, int]]:
    return analyse(source, NEUTRAL).spans


def test_only_statements_with_a_trigger_word_are_looked_at():
    source = "import torch\nx = 1\n\ndef f():\n    y = 2\n    torch.cuda.synchronize()\n    return y\n"
    assert spans(source) == [(6, 6)]


def test_a_clause_that_is_not_a_statement_of_its_own_widens_to_its_statement():
    source = (
        "def f(a, b):\n"
        "    if a:\n"
        "        pass\n"
        "    elif torch.cuda.is_available():\n"
        "        pass\n"
        "    if b: pass\n"
        "    else: x.cuda()\n"
        "    z = 0\n"
    )
    assert spans(source) == [(2, 5), (6, 7)]


def test_statements_sharing_a_line_go_together_and_a_backslash_continues_the_last_one():
    source = 'import torch\na = 1; b = x.cuda()\nc = "cuda" \\\n  # a comment on a continued line\nd = 2\n'
    assert spans(source) == [(2, 2), (3, 4)]


def test_a_decorated_definition_starts_at_its_first_decorator():
    source = "import torch\n\n@torch.cuda.amp.custom_fwd\n@other\ndef f(x):\n    return x\n"
    assert spans(source) == [(3, 6)]


def test_words_in_comments_and_docstrings_make_no_statement_interesting():
    source = '"""Uses cuda."""\n# torch.cuda.synchronize()\ndef f():\n    """cuda here too."""\n    return 1\n'
    assert spans(source) == []


@pytest.mark.parametrize("source", [
    "if a:\n\tx = torch.cuda.current_device()\n\ty = 1\n",  # tabs
    "if a:\r\n    x = t.cuda()\r\n    y = 1\r\n",  # CRLF
    "if a:\n    x = t.cuda()",  # no newline at the end
    "if a:\n    x = t.cuda(  # open bracket\n  0)\n",  # a continuation line indented less
    "class A:\n    def f(self):\n        return t.cuda()\n\n\n    # trailing comment\n",
])
def test_the_statements_shown_to_the_rules_splice_back_byte_for_byte(source):
    analysis = analyse(source, NEUTRAL)
    assert analysis.spans
    snippets = Snippets(analysis.lines, analysis.spans)
    assert snippets.splice(cst.parse_module(snippets.source)) == source


def test_every_line_shown_maps_to_its_line_in_the_file():
    source = "import torch\nif a:\n    x = t.cuda()\n    y = 2\nz = t.cuda()\n"
    snippets = Snippets(source_lines(source), analyse(source, NEUTRAL).spans)
    shown = snippets.source.splitlines()
    mapped = [snippets.file_line(number) for number in range(1, len(shown) + 1)]
    assert shown[0] == "if True:" and mapped[0] is None
    for number, line in zip(mapped[1:], shown[1:]):
        assert source.splitlines()[number - 1] == line


@pytest.mark.parametrize("target", TARGETS)
def test_the_statements_picked_give_what_the_whole_file_gives(target):
    source = (
        "import torch, os\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "from torch.cuda import amp\n"
        "def main(rank, device='cuda'):\n"
        "    if torch.cuda.is_available(): torch.cuda.set_device(rank)\n"
        "    elif rank: pass\n"
        "    os.environ['NCCL_DEBUG'] = 'INFO'; x = torch.zeros(1).double()\n"
        "    with amp.autocast():\n"
        "        model = DDP(model, device_ids=[rank])\n"
        "    return [t.cuda() for t in x]\n"
    )
    chosen = target_named(target)
    picked = run_rules(source, chosen)
    assert picked == run_rules(source, chosen, every_rule=True)
    # Statements on one line, in an if/elif and in a comprehension are each converted (docs/migrate.md).
    assert CONVERTED_LINES[target] <= set(picked.code.splitlines())


# Two lines of the source above, as each target writes them (the API table in docs/migrate.md).
CONVERTED_LINES = {
    "neutral": {
        "    if portlayer.is_available(): portlayer.set_device(rank)",
        "    return [t.to(portlayer.device()) for t in x]",
    },
    "torch": {
        "    if torch.accelerator.is_available(): torch.get_device_module().set_device(rank)",
        '    return [t.to(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")) '
        "for t in x]",
    },
    "npu": {"    if torch.npu.is_available(): torch.npu.set_device(rank)", "    return [t.npu() for t in x]"},
    "musa": {"    if torch.musa.is_available(): torch.musa.set_device(rank)", "    return [t.musa() for t in x]"},
}
