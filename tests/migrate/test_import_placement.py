"""Where an added import goes when the import it replaces was the module's only one."""

from portlayer.migrate.engine import migrate_source


def test_an_added_import_takes_the_place_of_the_removed_one_above_the_blank_lines():
    source = "import torch\n\n\ndef step():\n    torch.cuda.synchronize()\n"

    # `import torch` is unused after the rewrite and goes; the blank lines stay below the new import.
    assert migrate_source(source).code == "import portlayer\n\n\ndef step():\n    portlayer.synchronize()\n"


def test_comments_above_the_first_statement_stay_above_the_added_import():
    source = "#!/usr/bin/env python\n# training step\n\nimport torch\n\n\ndef step():\n    torch.cuda.synchronize()\n"

    assert migrate_source(source).code == (
        "#!/usr/bin/env python\n# training step\n\nimport portlayer\n\n\ndef step():\n    portlayer.synchronize()\n"
    )
