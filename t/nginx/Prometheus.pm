package Prometheus;

# Reads the Prometheus text exposition format (version 0.0.4) that
# llm_prometheus writes, strictly enough to catch format mistakes: every
# line is a comment (# HELP / # TYPE) or "name{labels} value", label values
# are quoted, and every sample belongs to a family announced by # TYPE.
#
#   my $m = Prometheus::parse($text);          # dies on a malformed line
#   $m->value('vllm:prompt_tokens_total')      # the one series of a name
#   $m->value('vllm:request_success_total', finished_reason => 'abort')
#   $m->series('vllm:e2e_request_latency_seconds_bucket')  # [[labels, v]]

use strict;
use warnings;

sub parse {
    my ($text) = @_;
    my $self = bless { samples => [], type => {}, help => {}, order => [] },
                     __PACKAGE__;
    for my $line (split /\n/, $text) {
        if ($line =~ /^# (HELP|TYPE) (\S+) (.*)$/) {
            $self->{lc $1}{$2} = $3;
            push @{ $self->{order} }, $2 if $1 eq 'TYPE';
            next;
        }
        die "not a sample line: $line\n"
            unless $line =~ /^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$/;
        my ($name, $l, $v) = ($1, $2, $3);
        my @labels;
        while (length $l) {
            $l =~ s/^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?//
                or die "bad labels in: $line\n";
            push @labels, [$1, $2];
        }
        my $value = $v eq '+Inf' ? 9**9**9 : $v eq '-Inf' ? -9**9**9
                  : $v eq 'NaN' ? 'NaN' : $v + 0;
        push @{ $self->{samples} }, { name => $name, labels => \@labels,
                                      raw => $v, value => $value,
                                      line => $line };
    }
    return $self;
}

sub samples { @{ $_[0]{samples} } }

# the family a sample name belongs to (histogram suffixes stripped)
sub family {
    my ($self, $name) = @_;
    return $name if exists $self->{type}{$name};
    (my $base = $name) =~ s/_(bucket|sum|count)$//;
    return exists $self->{type}{$base} ? $base : undef;
}

sub series {
    my ($self, $name, %want) = @_;
    my @out;
    SAMPLE: for my $s ($self->samples) {
        next unless $s->{name} eq $name;
        my %l = map { @$_ } @{ $s->{labels} };
        for (keys %want) {
            next SAMPLE unless defined $l{$_} && $l{$_} eq $want{$_};
        }
        push @out, [\%l, $s->{value}, $s->{raw}];
    }
    return \@out;
}

# the value of the one series that matches, undef when none or several
sub value {
    my ($self, $name, %want) = @_;
    my $s = $self->series($name, %want);
    return @$s == 1 ? $s->[0][1] : undef;
}

1;
