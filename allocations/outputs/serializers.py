"""The API's shapes of research outputs: an output in and out, and a BibTeX upload's answer.

The rules of each kind are ``output_details_check``'s: the input serializer asks it and puts
its sentence under the field it names (a 400 with ``errors.<field>``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rest_framework import serializers

from allocations.models import ResearchOutput
from allocations.outputs.bibtex import MAX_BIBTEX_BYTES
from allocations.outputs.doi import DOI_FORMAT, DoiError
from allocations.outputs.services import (
    DETAIL_FIELDS,
    OutputDetails,
    OutputError,
    output_details_check,
)
from kit.api import ApiModelSerializer, slug_of


class OutputInputSerializer(serializers.Serializer):
    """An output. On a change (PATCH) the fields left out keep their values."""

    kind = serializers.ChoiceField(choices=ResearchOutput.Kind.choices)
    title = serializers.CharField(max_length=500)
    authors = serializers.CharField(
        max_length=10_000, required=False, allow_blank=True,
        help_text="as cited: 'Surname, A. and Other, B.'",
    )  # fmt: skip
    year = serializers.IntegerField(min_value=1000, max_value=2999, required=False, allow_null=True)
    venue = serializers.CharField(max_length=300, required=False, allow_blank=True)
    doi = serializers.CharField(
        max_length=250, required=False, allow_blank=True, help_text=DOI_FORMAT
    )
    funder = serializers.CharField(max_length=200, required=False, allow_blank=True)
    grant_number = serializers.CharField(max_length=100, required=False, allow_blank=True)
    amount = serializers.DecimalField(
        max_digits=16, decimal_places=2, min_value=0, required=False, allow_null=True
    )
    currency = serializers.CharField(
        max_length=3, required=False, allow_blank=True, help_text="ISO 4217, such as AUD"
    )
    period_start = serializers.DateField(required=False, allow_null=True)
    period_end = serializers.DateField(required=False, allow_null=True)
    url = serializers.URLField(
        max_length=500, required=False, allow_blank=True,
        help_text="required for a data set and software",
    )  # fmt: skip

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """``{"details": OutputDetails}``, checked; the stored output (in the context as
        ``output``) gives the fields a PATCH leaves out."""
        output = self.context.get("output")
        values: dict[str, Any] = {}
        for name in DETAIL_FIELDS:
            if name in attrs:
                values[name] = attrs[name]
            elif output is not None:
                values[name] = getattr(output, name)
        values = {
            name: ("" if value is None and name not in _NULLABLE else value)
            for name, value in values.items()
        }
        if "kind" not in values or "title" not in values:
            missing = [name for name in ("kind", "title") if name not in values]
            raise serializers.ValidationError(
                {name: ["This field is required."] for name in missing}
            )
        try:
            details = output_details_check(OutputDetails(**values))
        except (OutputError, DoiError) as error:
            field = error.field or "non_field_errors"
            raise serializers.ValidationError({field: [str(error)]}) from None
        return {"details": details}


_NULLABLE = {"year", "amount", "period_start", "period_end"}


class OutputOutputSerializer(ApiModelSerializer):
    project = slug_of("code")
    added_by = slug_of("username")
    # Text, not a "uri": empty when the output has none.
    url = serializers.CharField(read_only=True, help_text="a web address, or empty")

    class Meta:
        model = ResearchOutput
        fields = ["id", "project", *DETAIL_FIELDS, "added_by", "added_at"]
        read_only_fields = fields


class BibtexUploadInputSerializer(serializers.Serializer):
    file = serializers.FileField(help_text=f"a .bib file of at most {MAX_BIBTEX_BYTES // 1024} KiB")

    def validate_file(self, upload: Any) -> bytes:
        """The bytes, read up to one past the limit (``bibtex_read`` says it is too large)."""
        return bytes(upload.read(MAX_BIBTEX_BYTES + 1))


class BibProblemSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="the entry's citation key, or where it is")
    reason = serializers.CharField()


class BibtexUploadOutputSerializer(serializers.Serializer):
    added = OutputOutputSerializer(many=True)
    problems = BibProblemSerializer(many=True, help_text="the entries left out, and why")

    @staticmethod
    def body(added: list[ResearchOutput], problems: list[Any]) -> dict[str, Any]:
        return {
            "added": OutputOutputSerializer(added, many=True).data,
            "problems": [asdict(problem) for problem in problems],
        }
